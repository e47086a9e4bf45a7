package apiv1

// UpdateSandboxRequest is the body of PATCH /v1/sandboxes/{id}: the fields
// given change, together, on a running or paused sandbox.
type UpdateSandboxRequest struct {
	// Timeout makes the sandbox's lifetime end this many seconds from now
	// (a paused sandbox: after it resumes; paused time does not count),
	// shortening or extending it; 0 ends it now (as a timeout). At most
	// a day. The sandbox's expires_at says where the end is.
	Timeout *float64 `json:"timeout,omitempty"`
	// ExtendOnly keeps a lifetime that already ends later than Timeout
	// would make it end: the end only ever moves later.
	ExtendOnly bool `json:"extend_only,omitempty"`
	// Tags is a JSON merge patch of the tags: a string sets a tag, null
	// removes it, tags not named stay. Keys under "corral." are refused.
	Tags map[string]*string `json:"tags,omitempty"`
}
