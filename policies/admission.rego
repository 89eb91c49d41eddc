# AMF admission policy: may an advertised agent (already validated and risk-scored by a DMZ
# watcher) enter the registry? This file is the single source of truth; it is compiled to the wasm
# bundle (scripts/build-policy.sh) or served by an OPA server. Tunables live in data.json
# (data.policy), never here.
#
# Entry point: data.amf.admission.decision
#   {"allow": bool, "reasons": [sorted deny reasons, empty when allowed], "threshold": number}
#
# Every rule fails closed: a missing or malformed input field produces a deny reason, never an allow.
package amf.admission

# True when the data document (data.json) is loaded.
policy_data_loaded if is_number(data.policy.default_threshold)

# The risk threshold is looked up by the advertisement's VISIBILITY (local | mesh | public), not by
# its trust-domain name. Rationale: the locked defaults (AMF decision #10) are keyed "local",
# "mesh" and "public" — the three visibility levels, i.e. the "trust domains" of the
# advertisement in the spec's coarse sense — whereas trust-domain names (e.g. "example.org")
# are deployment-specific and open-ended. A visibility level without an entry in
# data.policy.thresholds falls back to data.policy.default_threshold.
# Without the data document the threshold is 0 (fail closed) and policy_data_missing is reported.
threshold := t if {
	t := data.policy.thresholds[input.advertisement.visibility]
	is_number(t)
} else := t if {
	t := data.policy.default_threshold
	is_number(t)
} else := 0

# Risk is acceptable when it is a number not above the threshold (equal is allowed).
risk_ok if {
	is_number(input.summary.risk_score)
	input.summary.risk_score <= threshold
}

# Mesh and public visibility need a verified SPIFFE SVID (decision #3a); static identity is
# local-only whatever it claims.
svid_ok if {
	input.identity.mode == "spiffe"
	input.identity.svid_verified == true
}

# At least one advertised protocol is in data.policy.protocol_allowlist.
protocol_allowed if {
	some p in input.advertisement.protocols
	p in data.policy.protocol_allowlist
}

# The MCP endpoint is plaintext HTTP (case-insensitive scheme).
plaintext_mcp if {
	is_string(input.advertisement.mcp_endpoint)
	startswith(lower(input.advertisement.mcp_endpoint), "http://")
}

deny contains "policy_data_missing" if not policy_data_loaded

deny contains "risk_above_threshold" if not risk_ok

# Decision #9: a watcher summary that disagrees with the raw record is denied, whatever its risk.
deny contains "summary_mismatch" if not input.summary_mismatch == false

deny contains "visibility_requires_svid" if {
	not input.advertisement.visibility == "local"
	not svid_ok
}

deny contains "protocol_not_allowed" if not protocol_allowed

# AMF_MCP_REQUIRE_TLS=true refuses agents whose MCP endpoint is http://.
deny contains "plaintext_mcp_refused" if {
	input.mcp_require_tls == true
	plaintext_mcp
}

# Local visibility means self-asserted identity, which is only accepted from the coordinator's own
# trust domain; agents of another trust domain must come in as mesh/public with a verified SVID.
deny contains "foreign_trust_domain" if {
	input.advertisement.visibility == "local"
	not input.advertisement.trust_domain == input.coordinator_trust_domain
}

# The deny reasons as a sorted array (stable order for logs, events and tests).
reasons := sort(deny)

decision := {
	"allow": count(reasons) == 0,
	"reasons": reasons,
	"threshold": threshold,
}
