# AMF delegation policy (decision #7): may `delegator` delegate a task whose delegation chain
# (root-first list of the agent ids that delegated before) is `chain`?
#
# Entry point: data.amf.delegation.decision
#   input:  {"chain": [agent ids], "delegator": agent id}
#   output: {"allow": bool, "reasons": [sorted deny reasons, empty when allowed], "max_depth": number}
#
# Cycle detection is mandatory and not configurable; the depth limit is
# data.policy.max_delegation_depth (data.json). Malformed input fails closed.
package amf.delegation

# The configured depth limit, or 0 (deny everything) when the data document is missing.
max_depth := d if {
	d := data.policy.max_delegation_depth
	is_number(d)
} else := 0

well_formed if {
	is_array(input.chain)
	is_string(input.delegator)
	every id in input.chain {
		is_string(id)
	}
}

deny contains "invalid_input" if not well_formed

deny contains "policy_data_missing" if not is_number(data.policy.max_delegation_depth)

# The delegator already appears in the chain, or the chain itself repeats an agent.
deny contains "delegation_cycle" if input.delegator in input.chain

deny contains "delegation_cycle" if {
	is_array(input.chain)
	count({id | some id in input.chain}) != count(input.chain)
}

deny contains "delegation_depth_exceeded" if {
	is_array(input.chain)
	count(input.chain) >= max_depth
}

# The deny reasons as a sorted array.
reasons := sort(deny)

decision := {
	"allow": count(reasons) == 0,
	"reasons": reasons,
	"max_depth": max_depth,
}
