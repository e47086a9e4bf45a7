package e2b

import "encoding/json"

// The wire types, as E2B's spec/openapi.yml names them. Only what Corral
// reads or writes is here; a request field Corral cannot honour is
// decoded so it can be refused by name (400), never silently dropped.

// apiError is E2B's error body.
type apiError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// newSandbox is NewSandbox (v1) and NewSandboxV2.
type newSandbox struct {
	TemplateID          string            `json:"templateID"`
	Timeout             *float64          `json:"timeout,omitempty"`
	Metadata            map[string]string `json:"metadata,omitempty"`
	EnvVars             map[string]string `json:"envVars,omitempty"`
	AllowInternetAccess *bool             `json:"allow_internet_access,omitempty"`
	Network             *networkConfig    `json:"network,omitempty"`
	AutoPause           *bool             `json:"autoPause,omitempty"`
	AutoPauseMemory     *bool             `json:"autoPauseMemory,omitempty"`
	AutoResume          *autoResumeConfig `json:"autoResume,omitempty"`
	Secure              *bool             `json:"secure,omitempty"`
	MCP                 json.RawMessage   `json:"mcp,omitempty"`
	IAM                 json.RawMessage   `json:"iam,omitempty"`
	VolumeMounts        []json.RawMessage `json:"volumeMounts,omitempty"`
	Lifecycle           *lifecycleRequest `json:"lifecycle,omitempty"`
}

// lifecycleRequest is the older SDKs' lifecycle object on create.
type lifecycleRequest struct {
	OnTimeout  string `json:"onTimeout,omitempty"`
	AutoResume *bool  `json:"autoResume,omitempty"`
}

type autoResumeConfig struct {
	Enabled bool `json:"enabled"`
}

// networkConfig is SandboxNetworkConfig (create) and
// SandboxNetworkUpdateConfig (PUT .../network).
type networkConfig struct {
	AllowInternetAccess *bool           `json:"allow_internet_access,omitempty"`
	AllowOut            []string        `json:"allowOut,omitempty"`
	DenyOut             []string        `json:"denyOut,omitempty"`
	EgressProxy         json.RawMessage `json:"egressProxy,omitempty"`
	Rules               json.RawMessage `json:"rules,omitempty"`
	AllowPublicTraffic  *bool           `json:"allowPublicTraffic,omitempty"`
	MaskRequestHost     *string         `json:"maskRequestHost,omitempty"`
	HTTPSPorts          []int           `json:"httpsPorts,omitempty"`
}

// sandboxOut is Sandbox: what create, connect and resume answer.
type sandboxOut struct {
	SandboxID          string  `json:"sandboxID"`
	TemplateID         string  `json:"templateID"`
	ClientID           string  `json:"clientID"`
	Alias              string  `json:"alias,omitempty"`
	EnvdVersion        string  `json:"envdVersion"`
	EnvdAccessToken    string  `json:"envdAccessToken,omitempty"`
	TrafficAccessToken *string `json:"trafficAccessToken"`
	Domain             *string `json:"domain"`
}

// listedSandbox is ListedSandbox; sandboxDetail adds SandboxDetail's
// fields.
type listedSandbox struct {
	SandboxID   string            `json:"sandboxID"`
	TemplateID  string            `json:"templateID"`
	ClientID    string            `json:"clientID"`
	Alias       string            `json:"alias,omitempty"`
	CPUCount    int               `json:"cpuCount"`
	MemoryMB    int64             `json:"memoryMB"`
	DiskSizeMB  int64             `json:"diskSizeMB"`
	EnvdVersion string            `json:"envdVersion"`
	Metadata    map[string]string `json:"metadata"`
	StartedAt   string            `json:"startedAt"`
	EndAt       string            `json:"endAt"`
	State       string            `json:"state"`
}

type sandboxDetail struct {
	listedSandbox
	Domain              *string        `json:"domain"`
	EnvdAccessToken     string         `json:"envdAccessToken,omitempty"`
	AllowInternetAccess *bool          `json:"allowInternetAccess"`
	Network             *networkConfig `json:"network,omitempty"`
	Lifecycle           lifecycleOut   `json:"lifecycle"`
}

type lifecycleOut struct {
	AutoResume bool   `json:"autoResume"`
	OnTimeout  string `json:"onTimeout"`
}

// connectRequest is ConnectSandbox (v1: timeout required) and
// ConnectSandboxV2; resumeRequest is ResumedSandbox (v1 resume).
type connectRequest struct {
	Timeout *float64 `json:"timeout,omitempty"`
	Memory  *bool    `json:"memory,omitempty"`
}

type resumeRequest struct {
	Timeout   *float64 `json:"timeout,omitempty"`
	AutoPause *bool    `json:"autoPause,omitempty"`
	Memory    *bool    `json:"memory,omitempty"`
}

type timeoutRequest struct {
	Timeout *float64 `json:"timeout"`
}

type pauseRequest struct {
	Memory *bool `json:"memory,omitempty"`
}

// metric is SandboxMetric.
type metric struct {
	Timestamp     string  `json:"timestamp"`
	TimestampUnix int64   `json:"timestampUnix"`
	CPUCount      int     `json:"cpuCount"`
	CPUUsedPct    float64 `json:"cpuUsedPct"`
	MemUsed       uint64  `json:"memUsed"`
	MemTotal      uint64  `json:"memTotal"`
	MemCache      uint64  `json:"memCache"`
	DiskUsed      uint64  `json:"diskUsed"`
	DiskTotal     uint64  `json:"diskTotal"`
}

type sandboxesWithMetrics struct {
	Sandboxes map[string]metric `json:"sandboxes"`
}

type snapshotRequest struct {
	Name string `json:"name,omitempty"`
}

// snapshotInfo is SnapshotInfo.
type snapshotInfo struct {
	SnapshotID string   `json:"snapshotID"`
	Names      []string `json:"names"`
}

type forkRequest struct {
	Count   *int     `json:"count,omitempty"`
	Timeout *float64 `json:"timeout,omitempty"`
}

type forkResult struct {
	Sandbox *sandboxOut `json:"sandbox,omitempty"`
	Error   *apiError   `json:"error,omitempty"`
}
