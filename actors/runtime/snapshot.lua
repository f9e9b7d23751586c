-- drover's snapshot switch: make a fully written snapshot the latest, then trim the log.
--
-- KEYS[1] term key: the current leader's term (as in commit.lua)
-- KEYS[2] snapshot key: the id of the latest snapshot ("<index>:<term>:<nonce>"), or absent
-- KEYS[3] the state log stream (entry IDs "<index>-0")
-- KEYS[4] the new snapshot's list (header first, then its chunks), written before this call
-- KEYS[5] the previous snapshot's list ("" when there was none)
--
-- ARGV[1] the writer's term
-- ARGV[2] the new snapshot's id
-- ARGV[3] the new snapshot's index
-- ARGV[4] the previous snapshot's id, as the writer read it ("" for none)
-- ARGV[5] the first log index to keep (0: trim nothing); never above the new index + 1
--
-- Only the current leader switches, only to a newer snapshot, and only if no other writer
-- switched since it read the previous id. The new list loses the expiry it was written with
-- (a writer that dies half way leaves nothing behind for long); the previous one goes.
-- Returns {1, entries trimmed} or {0, reason}: "term", "raced", "older" or "missing".
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return {0, 'term'}
end
local current = redis.call('GET', KEYS[2]) or ''
if current ~= ARGV[4] then
  return {0, 'raced'}
end
if current ~= '' and tonumber(string.match(current, '^(%d+)')) >= tonumber(ARGV[3]) then
  return {0, 'older'}
end
if redis.call('EXISTS', KEYS[4]) == 0 then
  return {0, 'missing'}
end
redis.call('PERSIST', KEYS[4])
redis.call('SET', KEYS[2], ARGV[2])
if KEYS[5] ~= '' and KEYS[5] ~= KEYS[4] then
  redis.call('UNLINK', KEYS[5])
end
local trimmed = 0
if tonumber(ARGV[5]) > 0 then
  trimmed = redis.call('XTRIM', KEYS[3], 'MINID', ARGV[5] .. '-0')
end
return {1, trimmed}
