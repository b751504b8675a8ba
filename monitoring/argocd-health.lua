-- Argo CD health check for frontier.dev/FrontierTarget.
-- Install: argocd-cm, key `resource.customizations.health.frontier.dev_FrontierTarget`, value = this file.
-- Healthy: serving and meeting the SLO. Progressing: planning or rolling out. Degraded: invalid spec,
-- no configuration meets the SLO, rendering failed, or the SLO is missed.
local hs = {}
if obj.status == nil or obj.status.conditions == nil then
  hs.status = "Progressing"
  hs.message = "Waiting for the operator to plan"
  return hs
end
if obj.status.observedGeneration ~= nil and obj.metadata ~= nil and obj.metadata.generation ~= nil
    and obj.status.observedGeneration < obj.metadata.generation then
  hs.status = "Progressing"
  hs.message = "Waiting for the operator to see the latest spec"
  return hs
end
local conditions = {}
for _, condition in ipairs(obj.status.conditions) do
  conditions[condition.type] = condition
end
local function is(kind, value)
  return conditions[kind] ~= nil and conditions[kind].status == value
end
local function message(kind)
  local condition = conditions[kind]
  return condition.reason .. ": " .. (condition.message or "")
end
if is("PlanFeasible", "False") then
  hs.status = "Degraded"
  hs.message = message("PlanFeasible")
  return hs
end
if is("Degraded", "True") then
  hs.status = "Degraded"
  hs.message = message("Degraded")
  return hs
end
if is("Ready", "True") then
  if is("SLOMet", "False") then
    hs.status = "Degraded"
    hs.message = message("SLOMet")
    return hs
  end
  hs.status = "Healthy"
  hs.message = (obj.status.summary and obj.status.summary.config) or "Serving"
  return hs
end
hs.status = "Progressing"
if conditions["Ready"] ~= nil then
  hs.message = message("Ready")
else
  hs.message = "Rolling out"
end
return hs
