-- Argo CD health check for semops.io/SemanticModel.
-- Healthy: Ready=True. Progressing: not yet observed, or pending on an unreachable catalog
-- (semops retries with backoff). Degraded: any other Ready=False (invalid, conflict, missing source).
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
if ready.status == "True" then
  hs.status = "Healthy"
  hs.message = ready.message
  return hs
end
if ready.reason == "CatalogUnreachable" then
  hs.status = "Progressing"
else
  hs.status = "Degraded"
end
hs.message = ready.reason .. ": " .. (ready.message or "")
return hs
