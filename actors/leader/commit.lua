-- drover's fenced commit: the only way a state change becomes durable.
--
-- KEYS[1] index key: the index of the last committed entry
-- KEYS[2] term key: the current leader's term (a new leader INCRs it before serving)
-- KEYS[3] the state log stream; entry IDs are "<index>-0" so replicas can resume by index
-- KEYS[4] eval tokens hash: eval id -> token of its outstanding delivery (written by the broker)
-- KEYS[5..] with an outbox: each answer's reply stream, then the stream of the answered
--           requests
--
-- ARGV[1] the committer's term
-- ARGV[2] the index the committer believes is the last committed one
-- ARGV[3] how many entries follow; then for each: the encoded entry, the eval id whose
--         delivery token fences it ("" for none) and that token
-- then, with an outbox (durable_log.Outbox): the reply streams' MAXLEN (approximate), the
--         number of answers, for each its number of field values and the values (name, value,
--         ...); then the requests' consumer group ("" for none) and the ids to XACK
--
-- All entries commit, in order, or none does. Returns {1, last_index, errors...} on success,
-- errors naming each answer (its position, from 1) or ack that could not be written (a reply
-- stream that is not a stream): the commit stands and the other answers go out. Returns
-- {0, reason, current_index} with reason "term" (a newer leader exists: stop), "index"
-- (the log moved: reload it) or "token:<eval id>" (that eval was redelivered: the plan is
-- stale and must be rejected); then no answer goes out and nothing is acked.
--
-- Answers leave with the commit (one round trip a turn, not two), and never before their
-- entries are in the log.
local current = tonumber(redis.call('GET', KEYS[1]) or '0')
if redis.call('GET', KEYS[2]) ~= ARGV[1] then
  return {0, 'term', current}
end
if current ~= tonumber(ARGV[2]) then
  return {0, 'index', current}
end
local n = tonumber(ARGV[3])
for i = 0, n - 1 do
  local eval_id = ARGV[5 + 3 * i]
  if eval_id ~= '' and redis.call('HGET', KEYS[4], eval_id) ~= ARGV[6 + 3 * i] then
    return {0, 'token:' .. eval_id, current}
  end
end
for i = 0, n - 1 do
  current = current + 1
  redis.call('XADD', KEYS[3], current .. '-0', 'e', ARGV[4 + 3 * i])
end
redis.call('SET', KEYS[1], current)

local result = {1, current}
local at = 4 + 3 * n
if #ARGV < at then
  return result
end
local maxlen = ARGV[at]
local answers = tonumber(ARGV[at + 1])
at = at + 2
for j = 1, answers do
  local count = tonumber(ARGV[at])
  local fields = {}
  for f = 1, count do
    fields[f] = ARGV[at + f]
  end
  at = at + count + 1
  local written = redis.pcall('XADD', KEYS[4 + j], 'MAXLEN', '~', maxlen, '*', unpack(fields))
  if type(written) == 'table' and written.err then
    result[#result + 1] = 'answer ' .. j .. ': ' .. written.err
  end
end
local group = ARGV[at]
if group ~= '' then
  local ids = {}
  for k = at + 1, #ARGV do
    ids[#ids + 1] = ARGV[k]
    if #ids == 1000 or k == #ARGV then  -- unpack's stack is bounded
      local acked = redis.pcall('XACK', KEYS[5 + answers], group, unpack(ids))
      if type(acked) == 'table' and acked.err then
        result[#result + 1] = 'ack: ' .. acked.err
      end
      ids = {}
    end
  end
end
return result
