package main

import (
	"github.com/spf13/pflag"

	"corral/internal/secrets"
	"corral/pkg/apiv1"
)

// registerSecretFlags adds create's and run's --secret and --secret-header.
func registerSecretFlags(fs *pflag.FlagSet, names, headers *[]string) {
	fs.StringArrayVar(names, "secret", nil, "a stored secret whose keys and values every process gets as env variables; the code in the sandbox sees them (repeatable)")
	fs.StringArrayVar(headers, "secret-header", nil, "SECRET:KEY@HOST:HEADER[=TEMPLATE]: the egress proxy sets HEADER to TEMPLATE with {value} replaced by the secret's value (default template {value}) on the sandbox's TLS requests to HOST (intercepted with a CA of the sandbox's own) on port 443 with GET, HEAD, POST, PUT, PATCH, DELETE or OPTIONS (the API's ports and methods choose others; never TRACE, TRACK or CONNECT); never over plain HTTP; the sandbox never holds the value, e.g. api:TOKEN@api.example.com:Authorization=Bearer {value} (repeatable)")
}

// secretHeaders parses --secret-header flags (errors never echo a flag).
func secretHeaders(flags []string) ([]apiv1.SecretHeader, error) {
	var out []apiv1.SecretHeader
	for _, f := range flags {
		r, err := secrets.ParseHeaderRule(f)
		if err != nil {
			return nil, err
		}
		out = append(out, apiv1.SecretHeader{Secret: r.Secret, Key: r.Key, Host: r.Host, Header: r.Header, Template: r.Template})
	}
	return out, nil
}
