-- drover's fenced commit: the only way a state change becomes durable.
--
-- KEYS[1] index key: the index of the last committed entry
-- KEYS[2] term key: the current leader's term (a new leader INCRs it before serving)
-- KEYS[3] the state log stream; entry IDs are "<index>-0" so replicas can resume by index
-- KEYS[4] eval tokens hash: eval id -> token of its outstanding delivery (written by the broker)
--
-- ARGV[1] the committer's term
-- ARGV[2] the index the committer believes is the last committed one
-- ARGV[3] how many entries follow; then for each: the encoded entry, the eval id whose
--         delivery token fences it ("" for none) and that token
--
-- All entries commit, in order, or none does. Returns {1, last_index} on success, or
-- {0, reason, current_index} with reason "term" (a newer leader exists: stop), "index"
-- (the log moved: reload it) or "token:<eval id>" (that eval was redelivered: the plan is
-- stale and must be rejected).
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
return {1, current}
