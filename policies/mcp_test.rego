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

test_denies_listed_resource if {
	mcp.decision.reasons == ["resource_denied"] with input as object.union(ok_input, {"kind": "resource", "tool": "file:///etc/passwd"})
		with data.policy.mcp.denied_resources as ["*/file:///etc/passwd"]
}

test_denied_tool_name_does_not_deny_a_resource if {
	mcp.decision.allow with input as object.union(ok_input, {"kind": "resource", "tool": "shell"})
		with data.policy.mcp.denied_tools as ["*/shell"]
}

test_denies_listed_prompt if {
	mcp.decision.reasons == ["prompt_denied"] with input as object.union(ok_input, {"kind": "prompt", "tool": "leak"})
		with data.policy.mcp.denied_prompts as ["spiffe://local/worker/echo/leak"]
}

test_denies_unknown_kind if {
	mcp.decision.reasons == ["input_invalid"] with input as object.union(ok_input, {"kind": "shell"})
}
