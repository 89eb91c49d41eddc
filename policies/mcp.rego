# AMF MCP call policy: may a caller of the coordinator's federated `POST /mcp` invoke this tool of
# this agent? Evaluated on every tools/call before the call is forwarded. Tunables live in
# data.json (data.policy.mcp), never here.
#
# Entry point: data.amf.mcp.decision
#   {"allow": bool, "reasons": [sorted deny reasons, empty when allowed]}
#
# Input: {"caller": string, "agent_id": string, "tool": string, "trust_domain": string,
#         "argument_bytes": number, "agent_admitted": bool, "kind": string (optional)}
# kind is what the request reaches: "tool" (also when absent), "resource" (read or subscribe; tool is
# the agent's URI), "prompt" (tool is the prompt name) or "completion".
# Every rule fails closed: a missing or malformed input field produces a deny reason.
package amf.mcp

# The argument limit; without the data document nothing is allowed (limit 0 and a reason).
max_argument_bytes := n if {
	n := data.policy.mcp.max_argument_bytes
	is_number(n)
} else := 0

deny contains "policy_data_missing" if not is_number(data.policy.mcp.max_argument_bytes)

# The argument size is a number within the limit (a helper rule, so a missing field fails closed).
arguments_ok if {
	is_number(input.argument_bytes)
	input.argument_bytes <= max_argument_bytes
}

deny contains "arguments_too_large" if not arguments_ok

# The coordinator only forwards to agents that are admitted and live right now.
deny contains "agent_not_admitted" if not input.agent_admitted == true

# data.policy.mcp.denied_tools lists AMF tool names "<agent_id>/<tool>", or "*/<tool>" for a tool
# of any agent.
deny contains "tool_denied" if {
	is_tool
	some denied in data.policy.mcp.denied_tools
	denied in {concat("/", [input.agent_id, input.tool]), concat("/", ["*", input.tool])}
}

is_tool if not input.kind

is_tool if input.kind == "tool"

# data.policy.mcp.denied_resources lists "<agent_id>/<uri>" or "*/<uri>" (reads and subscriptions).
deny contains "resource_denied" if {
	input.kind == "resource"
	some denied in object.get(data.policy.mcp, "denied_resources", [])
	denied in {concat("/", [input.agent_id, input.tool]), concat("/", ["*", input.tool])}
}

# data.policy.mcp.denied_prompts lists "<agent_id>/<prompt>" or "*/<prompt>".
deny contains "prompt_denied" if {
	input.kind == "prompt"
	some denied in object.get(data.policy.mcp, "denied_prompts", [])
	denied in {concat("/", [input.agent_id, input.tool]), concat("/", ["*", input.tool])}
}

deny contains "input_invalid" if {
	input.kind
	not input.kind in {"tool", "resource", "prompt", "completion"}
}

# The call names an agent and a tool.
input_ok if {
	is_string(input.agent_id)
	is_string(input.tool)
}

deny contains "input_invalid" if not input_ok

reasons := sort(deny)

decision := {
	"allow": count(reasons) == 0,
	"reasons": reasons,
}
