package apiv1

import "time"

// CreateSecretRequest is the body of POST /v1/secrets. Values are never
// returned by any endpoint.
type CreateSecretRequest struct {
	Name   string            `json:"name"`
	Values map[string]string `json:"values"`
}

// RotateSecretRequest is the body of PUT /v1/secrets/{name}: the new
// values, which replace all the old ones.
type RotateSecretRequest struct {
	Values map[string]string `json:"values"`
}

// Secret is what the API shows of a secret: its name and keys.
type Secret struct {
	Name      string    `json:"name"`
	Keys      []string  `json:"keys"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// SecretList is the body of GET /v1/secrets.
type SecretList struct {
	Secrets []Secret `json:"secrets"`
}

// SecretHeader is an egress header rule: the proxy sets Header on the
// sandbox's TLS requests to Host (never plain HTTP) to Template with
// "{value}" replaced by the value of Key in secret Secret (default
// template: "{value}").
type SecretHeader struct {
	Secret   string `json:"secret"`
	Key      string `json:"key"`
	Host     string `json:"host"`
	Header   string `json:"header"`
	Template string `json:"template,omitempty"`
	// Ports the header is set on (default 443), over TLS only.
	Ports []int `json:"ports,omitempty"`
	// Methods the header is set for (upper-cased; default GET, HEAD,
	// POST, PUT, PATCH, DELETE and OPTIONS). TRACE, TRACK and CONNECT are
	// refused (invalid_argument): a TRACE is answered with the request,
	// the secret in it.
	Methods []string `json:"methods,omitempty"`
}
