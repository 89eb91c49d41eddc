# AMF MCP call policy: may a caller of the coordinator's federated `POST /mcp` invoke this tool of
# this agent? Evaluated on every tools/call before the call is forwarded. Tunables live in
# data.json (data.policy.mcp), never here.
#
# Entry point: data.amf.mcp.decision
#   {"allow": bool, "reasons": [sorted deny reasons, empty when allowed]}
#
# Input: {"caller": string, "agent_id": string, "tool": string, "trust_domain": string,
#         "argument_bytes": number, "agent_admitted": bool}
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
	some denied in data.policy.mcp.denied_tools
	denied in {concat("/", [input.agent_id, input.tool]), concat("/", ["*", input.tool])}
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
