package corral

import (
	"context"
	"net/url"

	"corral/pkg/apiv1"
)

// CreateSecret stores a secret: values are its keys and values, which no
// call ever returns.
func (c *Client) CreateSecret(ctx context.Context, name string, values map[string]string) (*apiv1.Secret, error) {
	var s apiv1.Secret
	if err := c.call(ctx, "POST", "/v1/secrets", nil, apiv1.CreateSecretRequest{Name: name, Values: values}, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// RotateSecret replaces all of secret name's values. Running sandboxes'
// env keeps the old ones; egress header injection uses the new ones from
// the next request.
func (c *Client) RotateSecret(ctx context.Context, name string, values map[string]string) (*apiv1.Secret, error) {
	var s apiv1.Secret
	if err := c.call(ctx, "PUT", "/v1/secrets/"+url.PathEscape(name), nil, apiv1.RotateSecretRequest{Values: values}, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// Secret returns a secret's name and keys.
func (c *Client) Secret(ctx context.Context, name string) (*apiv1.Secret, error) {
	var s apiv1.Secret
	if err := c.call(ctx, "GET", "/v1/secrets/"+url.PathEscape(name), nil, nil, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// Secrets lists every secret's name and keys.
func (c *Client) Secrets(ctx context.Context) ([]apiv1.Secret, error) {
	var out apiv1.SecretList
	if err := c.call(ctx, "GET", "/v1/secrets", nil, nil, &out); err != nil {
		return nil, err
	}
	return out.Secrets, nil
}

// RemoveSecret deletes a secret. Sandboxes created with it keep their env;
// header injection from it stops (requests get 502).
func (c *Client) RemoveSecret(ctx context.Context, name string) error {
	return c.call(ctx, "DELETE", "/v1/secrets/"+url.PathEscape(name), nil, nil, nil)
}
