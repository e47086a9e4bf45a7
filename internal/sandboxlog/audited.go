package sandboxlog

// auditedEvents maps the sandbox events the audit trail keeps to the
// trail's kinds: lifecycle moves, what the sandbox's network did or was
// refused, and changes made to it. Events that only narrate the daemon's
// own work (reconnects, log rotation) stay in the event log alone. The
// entry keeps the event's fields, never its message: a failure's can name
// host paths, which the trail, exported and verified as it is stored,
// must not hold.
var auditedEvents = map[string]string{
	"running":         "create",
	"terminated":      "terminate",
	"failed":          "failed",
	"paused":          "pause",
	"resumed":         "resume",
	"snapshot":        "snapshot",
	"fork":            "fork",
	"updated":         "update",
	"network_policy":  "network_policy",
	"egress_allowed":  "egress_allowed",
	"egress_denied":   "egress_denied",
	"limit_reached":   "limit_reached",
	"port_connection": "port_connection",
	"timeout":         "timeout",
	"idle_timeout":    "idle_timeout",
	"oom":             "oom",
	"crashed":         "crashed",
}
