# Unit tests for amf.admission (run: opa test policies/). The data document is policies/data.json.
package amf.admission_test

import data.amf.admission

base := {
	"advertisement": {
		"agent_id": "spiffe://amf.local/worker/a",
		"endpoint": "http://127.0.0.1:8766",
		"protocols": ["A2A/1.0", "MCP/2025-06-18"],
		"tags": ["echo"],
		"trust_domain": "amf.local",
		"visibility": "local",
		"card_url": "http://127.0.0.1:8766/.well-known/agent-card.json",
		"mcp_endpoint": "http://127.0.0.1:8766/mcp",
		"door": "mdns",
	},
	"summary": {"risk_score": 0.1, "risk_reason": "ok", "scorer": "rules"},
	"summary_mismatch": false,
	"identity": {"mode": "static", "svid_verified": false},
	"coordinator_trust_domain": "amf.local",
	"mcp_require_tls": false,
}

with_ad(patch) := object.union(base, {"advertisement": object.union(base.advertisement, patch)})

with_risk(r) := object.union(base, {"summary": object.union(base.summary, {"risk_score": r})})

spiffe := {"mode": "spiffe", "svid_verified": true}

test_local_low_risk_allowed if {
	admission.decision == {"allow": true, "reasons": [], "threshold": 0.7} with input as base
}

test_risk_at_threshold_allowed if {
	admission.decision.allow with input as with_risk(0.7)
}

test_risk_above_threshold_denied if {
	admission.decision.reasons == ["risk_above_threshold"] with input as with_risk(0.71)
}

test_mesh_threshold_and_svid if {
	inp := object.union(with_ad({"visibility": "mesh"}), {"identity": spiffe, "summary": {"risk_score": 0.3}})
	admission.decision == {"allow": true, "reasons": [], "threshold": 0.3} with input as inp
}

test_mesh_without_svid_denied if {
	admission.decision.reasons == ["visibility_requires_svid"] with input as with_ad({"visibility": "mesh"})
}

test_static_identity_claiming_svid_denied if {
	inp := object.union(with_ad({"visibility": "public"}), {"identity": {"mode": "static", "svid_verified": true}})
	"visibility_requires_svid" in admission.decision.reasons with input as inp
}

test_public_threshold if {
	inp := object.union(with_ad({"visibility": "public"}), {"identity": spiffe, "summary": {"risk_score": 0.11}})
	admission.decision == {"allow": false, "reasons": ["risk_above_threshold"], "threshold": 0.1} with input as inp
}

test_unknown_visibility_uses_default_and_needs_svid if {
	d := admission.decision with input as with_ad({"visibility": "galaxy"})
	d.threshold == 0.5
	d.reasons == ["visibility_requires_svid"]
}

test_mismatch_always_denied if {
	inp := object.union(with_risk(0), {"summary_mismatch": true})
	admission.decision.reasons == ["summary_mismatch"] with input as inp
}

test_missing_mismatch_flag_denied if {
	inp := object.remove(base, ["summary_mismatch"])
	admission.decision.reasons == ["summary_mismatch"] with input as inp
}

test_no_allowed_protocol if {
	admission.decision.reasons == ["protocol_not_allowed"] with input as with_ad({"protocols": ["FOO/1"]})
}

test_plaintext_mcp_refused_only_with_require_tls if {
	admission.decision.allow with input as base
	inp := object.union(base, {"mcp_require_tls": true})
	admission.decision.reasons == ["plaintext_mcp_refused"] with input as inp
	tls := object.union(with_ad({"mcp_endpoint": "https://127.0.0.1/mcp"}), {"mcp_require_tls": true})
	admission.decision.allow with input as tls
}

test_foreign_trust_domain if {
	admission.decision.reasons == ["foreign_trust_domain"] with input as with_ad({"trust_domain": "other.org"})
}

test_several_reasons_sorted if {
	inp := object.union(with_ad({"visibility": "mesh", "protocols": []}), {"summary_mismatch": true, "summary": {"risk_score": 0.9}})
	admission.decision.reasons == ["protocol_not_allowed", "risk_above_threshold", "summary_mismatch", "visibility_requires_svid"] with input as inp
}

test_thresholds_come_from_data if {
	d := admission.decision with input as base with data.policy.thresholds as {"local": 0.05}
	d.threshold == 0.05
	d.reasons == ["risk_above_threshold"]
}

test_missing_data_fails_closed if {
	d := admission.decision with input as with_risk(0) with data.policy as {}
	not d.allow
	"policy_data_missing" in d.reasons
}
