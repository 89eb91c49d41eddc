package amf.mcp_test

import data.amf.mcp

ok_input := {
	"caller": "127.0.0.1",
	"agent_id": "spiffe://local/worker/echo",
	"tool": "echo",
	"trust_domain": "local",
	"argument_bytes": 20,
	"agent_admitted": true,
}

test_allows_small_call if {
	mcp.decision == {"allow": true, "reasons": []} with input as ok_input
}

test_denies_large_arguments if {
	mcp.decision.reasons == ["arguments_too_large"] with input as object.union(ok_input, {"argument_bytes": 2097152})
}

test_denies_unadmitted_agent if {
	mcp.decision.reasons == ["agent_not_admitted"] with input as object.union(ok_input, {"agent_admitted": false})
}

test_denies_listed_tool if {
	mcp.decision.reasons == ["tool_denied"] with input as object.union(ok_input, {"tool": "shell"})
		with data.policy.mcp.denied_tools as ["*/shell"]
}

test_fails_closed_without_input if {
	not mcp.decision.allow with input as {}
}
