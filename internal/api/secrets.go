package api

import (
	"net/http"

	"corral/internal/manager"
	"corral/internal/secrets"
	"corral/pkg/apiv1"
)

// Secrets: created, rotated, listed and removed here; no endpoint returns
// a value, and no error carries one (secrets.ValidateValues).

func (s *Server) createSecret(w http.ResponseWriter, r *http.Request) {
	var req apiv1.CreateSecretRequest
	if err := decodeJSON(w, r, &req); err != nil {
		s.writeError(w, err)
		return
	}
	info, err := s.m.CreateSecret(r.Context(), req.Name, req.Values)
	if err != nil {
		s.writeError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, secretToAPI(info))
}

func (s *Server) rotateSecret(w http.ResponseWriter, r *http.Request) {
	var req apiv1.RotateSecretRequest
	if err := decodeJSON(w, r, &req); err != nil {
		s.writeError(w, err)
		return
	}
	info, err := s.m.RotateSecret(r.Context(), r.PathValue("name"), req.Values)
	if err != nil {
		s.writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, secretToAPI(info))
}

func (s *Server) getSecret(w http.ResponseWriter, r *http.Request) {
	info, err := s.m.GetSecret(r.Context(), r.PathValue("name"))
	if err != nil {
		s.writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, secretToAPI(info))
}

func (s *Server) listSecrets(w http.ResponseWriter, r *http.Request) {
	list, err := s.m.ListSecrets(r.Context())
	if err != nil {
		s.writeError(w, err)
		return
	}
	out := apiv1.SecretList{Secrets: []apiv1.Secret{}}
	for _, info := range list {
		out.Secrets = append(out.Secrets, secretToAPI(info))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) deleteSecret(w http.ResponseWriter, r *http.Request) {
	if err := s.m.DeleteSecret(r.Context(), r.PathValue("name")); err != nil {
		s.writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func secretToAPI(info manager.SecretInfo) apiv1.Secret {
	keys := info.Keys
	if keys == nil {
		keys = []string{}
	}
	return apiv1.Secret{Name: info.Name, Keys: keys, CreatedAt: info.CreatedAt, UpdatedAt: info.UpdatedAt}
}

func headerRulesOf(in []apiv1.SecretHeader) []secrets.HeaderRule {
	var out []secrets.HeaderRule
	for _, h := range in {
		out = append(out, secrets.HeaderRule{Secret: h.Secret, Key: h.Key, Host: h.Host, Header: h.Header, Template: h.Template, Ports: h.Ports, Methods: h.Methods})
	}
	return out
}

func headerRulesToAPI(in []secrets.HeaderRule) []apiv1.SecretHeader {
	var out []apiv1.SecretHeader
	for _, h := range in {
		out = append(out, apiv1.SecretHeader{Secret: h.Secret, Key: h.Key, Host: h.Host, Header: h.Header, Template: h.Template, Ports: h.Ports, Methods: h.Methods})
	}
	return out
}
