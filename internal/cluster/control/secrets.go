package control

import (
	"encoding/json"
	"fmt"
	"net/http"

	"corral/internal/cluster/nodeauth"
	"corral/internal/cluster/store"
	"corral/internal/errdefs"
	"corral/internal/seal"
	"corral/internal/secrets"
	"corral/pkg/apiv1"
)

// Secrets through a control plane are the cluster's: kept in the
// database, their values sealed with the key the join token derives
// (nodeauth.SecretKey), so the database alone opens nothing. A node
// opens a secret itself when a sandbox or process names it
// (node/secrets.go): values never travel between control planes and
// nodes, no endpoint returns one, and no error or log line carries one.

// maxSecretBody bounds a secret's body: its values and their JSON.
const maxSecretBody = 2 * secrets.MaxTotalBytes

func (s *Server) secretRoutes() {
	s.mux.HandleFunc("POST /v1/secrets", s.auth(s.createSecret))
	s.mux.HandleFunc("GET /v1/secrets", s.auth(s.listSecrets))
	s.mux.HandleFunc("GET /v1/secrets/{name}", s.auth(s.getSecret))
	s.mux.HandleFunc("PUT /v1/secrets/{name}", s.auth(s.rotateSecret))
	s.mux.HandleFunc("DELETE /v1/secrets/{name}", s.auth(s.deleteSecret))
}

// secretKey is the key the cluster's secrets are sealed with.
func (s *Server) secretKey() (*seal.Key, error) {
	return seal.New(nodeauth.SecretKey(s.join))
}

// readSecretBody decodes a secret's body strictly into v. The error
// never quotes the body (it may hold a value).
func readSecretBody(w http.ResponseWriter, r *http.Request, v any) error {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxSecretBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%w: body: not a JSON object of the secret's name and values (string to string), or over %d bytes", errdefs.ErrInvalidArgument, maxSecretBody)
	}
	if dec.More() {
		return fmt.Errorf("%w: body: one JSON object only", errdefs.ErrInvalidArgument)
	}
	return nil
}

func (s *Server) createSecret(w http.ResponseWriter, r *http.Request) {
	var req apiv1.CreateSecretRequest
	if err := readSecretBody(w, r, &req); err != nil {
		s.writeError(w, err)
		return
	}
	info, err := s.putSecret(r, req.Name, req.Values, false)
	if err != nil {
		s.writeError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, secretToAPI(info))
}

func (s *Server) rotateSecret(w http.ResponseWriter, r *http.Request) {
	var req apiv1.RotateSecretRequest
	if err := readSecretBody(w, r, &req); err != nil {
		s.writeError(w, err)
		return
	}
	info, err := s.putSecret(r, r.PathValue("name"), req.Values, true)
	if err != nil {
		s.writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, secretToAPI(info))
}

// putSecret validates and seals a new secret or new values for one.
func (s *Server) putSecret(r *http.Request, name string, values map[string]string, rotate bool) (store.SecretInfo, error) {
	if err := secrets.ValidateName("name", name); err != nil {
		return store.SecretInfo{}, err
	}
	if err := secrets.ValidateValues("values", values); err != nil {
		return store.SecretInfo{}, err
	}
	k, err := s.secretKey()
	if err != nil {
		return store.SecretInfo{}, err
	}
	op := s.st.CreateSecret
	if rotate {
		op = s.st.RotateSecret
	}
	info, err := op(r.Context(), k, name, secrets.Keys(values), values)
	if err == nil {
		s.log.InfoContext(r.Context(), "secret stored", "op", "cluster", "secret", name, "keys", info.Keys, "rotated", rotate)
	}
	return info, err
}

func (s *Server) getSecret(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if err := secrets.ValidateName("name", name); err != nil {
		s.writeError(w, err)
		return
	}
	info, err := s.st.SecretInfo(r.Context(), name)
	if err != nil {
		s.writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, secretToAPI(info))
}

func (s *Server) listSecrets(w http.ResponseWriter, r *http.Request) {
	list, err := s.st.ListSecrets(r.Context())
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
	name := r.PathValue("name")
	if err := secrets.ValidateName("name", name); err != nil {
		s.writeError(w, err)
		return
	}
	if err := s.st.DeleteSecret(r.Context(), name); err != nil {
		s.writeError(w, err)
		return
	}
	s.log.InfoContext(r.Context(), "secret removed", "op", "cluster", "secret", name)
	w.WriteHeader(http.StatusNoContent)
}

func secretToAPI(info store.SecretInfo) apiv1.Secret {
	keys := info.Keys
	if keys == nil {
		keys = []string{}
	}
	return apiv1.Secret{Name: info.Name, Keys: keys, CreatedAt: info.CreatedAt, UpdatedAt: info.UpdatedAt}
}
