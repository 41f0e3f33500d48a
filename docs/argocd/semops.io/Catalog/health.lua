-- Argo CD health check for semops.io/Catalog.
-- Healthy: Ready=True and the system is reachable (or not probed). Degraded: Ready=False or
-- Reachable=False. Progressing: not yet observed.
local hs = {}
local function ready_condition(obj)
  if obj.status == nil or obj.status.conditions == nil then return nil end
  for _, c in ipairs(obj.status.conditions) do
    if c.type == "Ready" then return c end
  end
  return nil
end
local function find_condition(obj, type)
  if obj.status == nil or obj.status.conditions == nil then return nil end
  for _, c in ipairs(obj.status.conditions) do
    if c.type == type then return c end
  end
  return nil
end
-- The controller has not seen this spec yet: never report a stale verdict as current.
local generation = obj.metadata.generation or 0
if obj.status == nil or obj.status.observedGeneration == nil or obj.status.observedGeneration < generation then
  hs.status = "Progressing"
  hs.message = "Waiting for semops to observe generation " .. tostring(generation)
  return hs
end
local ready = ready_condition(obj)
if ready == nil or ready.status == "Unknown" then
  hs.status = "Progressing"
  hs.message = "Waiting for the Ready condition"
  return hs
end
if ready.status ~= "True" then
  hs.status = "Degraded"
  hs.message = ready.reason .. ": " .. (ready.message or "")
  return hs
end
local reachable = find_condition(obj, "Reachable")
if reachable ~= nil and reachable.status == "False" then
  hs.status = "Degraded"
  hs.message = reachable.reason .. ": " .. (reachable.message or "")
  return hs
end
hs.status = "Healthy"
hs.message = ready.message
return hs
