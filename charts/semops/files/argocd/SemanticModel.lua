-- Argo CD health check for semops.io/SemanticModel (Lua 5.1, Argo CD's sandbox: base, table, os).
-- Healthy: Ready=True. Progressing: not yet observed, or Ready=False while Reconciling=True (a
-- source catalog not there yet, a catalog unreachable). Degraded: Ready=False and Stalled (invalid
-- definition, name conflict, a source missing).
local hs = {}
local function condition(obj, type)
  if obj.status == nil or obj.status.conditions == nil then return nil end
  for _, c in ipairs(obj.status.conditions) do
    if c.type == type then return c end
  end
  return nil
end
local function says(c)
  return c.reason .. ": " .. (c.message or "")
end
-- The controller has not seen this spec yet: never report a stale verdict as current.
local generation = obj.metadata.generation or 0
if obj.status == nil or obj.status.observedGeneration == nil or obj.status.observedGeneration < generation then
  hs.status = "Progressing"
  hs.message = "Waiting for semops to observe generation " .. tostring(generation)
  return hs
end
local ready = condition(obj, "Ready")
if ready == nil or ready.status == "Unknown" then
  hs.status = "Progressing"
  hs.message = "Waiting for the Ready condition"
  return hs
end
if ready.status ~= "True" then
  -- Reconciling=True: semops waits on something that may still arrive or answer (a catalog
  -- applied with its models, a server coming back). Anything else needs a person (Stalled).
  local reconciling = condition(obj, "Reconciling")
  if reconciling ~= nil and reconciling.status == "True" then
    hs.status = "Progressing"
  else
    hs.status = "Degraded"
  end
  hs.message = says(ready)
  return hs
end
hs.status = "Healthy"
hs.message = ready.message
return hs
