# Unit tests for amf.delegation (run: opa test policies/). The data document is policies/data.json.
package amf.delegation_test

import data.amf.delegation

test_empty_chain_allowed if {
	delegation.decision == {"allow": true, "reasons": [], "max_depth": 5} with input as {"chain": [], "delegator": "a"}
}

test_depth_4_allowed if {
	delegation.decision.allow with input as {"chain": ["a", "b", "c", "d"], "delegator": "e"}
}

test_depth_5_denied if {
	delegation.decision.reasons == ["delegation_depth_exceeded"] with input as {"chain": ["a", "b", "c", "d", "e"], "delegator": "f"}
}

test_cycle_denied if {
	delegation.decision.reasons == ["delegation_cycle"] with input as {"chain": ["a", "b"], "delegator": "a"}
}

test_repeated_agent_in_chain_denied if {
	delegation.decision.reasons == ["delegation_cycle"] with input as {"chain": ["a", "b", "a"], "delegator": "c"}
}

test_cycle_and_depth if {
	inp := {"chain": ["a", "b", "c", "d", "e"], "delegator": "c"}
	delegation.decision.reasons == ["delegation_cycle", "delegation_depth_exceeded"] with input as inp
}

test_depth_from_data if {
	d := delegation.decision with input as {"chain": ["a", "b"], "delegator": "c"} with data.policy.max_delegation_depth as 2
	d.reasons == ["delegation_depth_exceeded"]
	d.max_depth == 2
}

test_malformed_input_denied if {
	delegation.decision.reasons == ["invalid_input"] with input as {"chain": "a,b", "delegator": "c"}
	"invalid_input" in delegation.decision.reasons with input as {"chain": []}
}
