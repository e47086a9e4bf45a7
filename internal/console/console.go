// Package console is Corral's web console: a single page (HTML, CSS and
// script embedded in the binary, xterm.js vendored beside them) that the
// daemon serves at / on its API listener, and the sign-in and sign-out
// endpoints under /console/ that turn the API token into a session cookie
// (internal/websession). The page itself talks only to the public JSON
// API (/v1/...), which accepts that cookie.
//
// It imports websession and errdefs; only the daemon imports it.
package console

import (
	"bytes"
	"crypto/rand"
	"embed"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"strings"

	"corral/internal/errdefs"
	"corral/internal/websession"
)

//go:embed assets
var assets embed.FS

var index = template.Must(template.ParseFS(assets, "assets/index.html"))

// Handler serves the console: GET / (the page), GET /console/assets/...,
// POST /console/login and POST /console/logout.
type Handler struct {
	sessions *websession.Store
	version  string
	log      *slog.Logger
	mux      *http.ServeMux
}

// New returns the console for the daemon whose browser sessions are st.
func New(st *websession.Store, version string, log *slog.Logger) *Handler {
	h := &Handler{sessions: st, version: version, log: log, mux: http.NewServeMux()}
	static, _ := fs.Sub(assets, "assets")
	files := http.StripPrefix("/console/assets/", http.FileServerFS(static))
	h.mux.HandleFunc("GET /{$}", h.page)
	h.mux.Handle("GET /console/assets/", headers(files, ""))
	h.mux.HandleFunc("POST /console/login", h.login)
	h.mux.HandleFunc("POST /console/logout", h.logout)
	h.mux.HandleFunc("/console/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, fmt.Errorf("%w: no console route for %s %s", errdefs.ErrNotFound, r.Method, r.URL.Path))
	})
	return h
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }

// headers sets the console's security headers: a Content-Security-Policy
// that lets the page load and connect to its own origin only (styles also
// from elements carrying nonce, which xterm.js creates at run time), no
// framing, no sniffing, no referrer.
func headers(next http.Handler, nonce string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		style := "style-src 'self'"
		if nonce != "" {
			style += " 'nonce-" + nonce + "'"
		}
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'self'; "+style+"; img-src 'self' data: blob:; frame-ancestors 'none'; base-uri 'none'; form-action 'self'; object-src 'none'")
		h.Set("X-Frame-Options", "DENY")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-cache")
		next.ServeHTTP(w, r)
	})
}

func (h *Handler) page(w http.ResponseWriter, r *http.Request) {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	nonce := base64.RawURLEncoding.EncodeToString(b)
	var buf bytes.Buffer
	if err := index.Execute(&buf, map[string]string{"Nonce": nonce, "Version": h.version}); err != nil {
		h.log.Error("rendering the console page", "op", "console", "err", err)
		writeError(w, errors.New("internal error"))
		return
	}
	headers(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write(buf.Bytes())
	}), nonce).ServeHTTP(w, r)
}

// login reads {"token": "..."} (JSON) or a token form field.
func (h *Handler) login(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Token string `json:"token"`
	}
	r.Body = http.MaxBytesReader(w, r.Body, 8<<10)
	if strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
		b, err := io.ReadAll(r.Body)
		if err == nil {
			err = json.Unmarshal(b, &body)
		}
		if err != nil {
			writeError(w, errdefs.Invalid("body", `must be JSON {"token": "..."} of at most 8 KiB`))
			return
		}
	} else {
		body.Token = r.PostFormValue("token")
	}
	if err := h.sessions.Login(w, r, strings.TrimSpace(body.Token)); err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (h *Handler) logout(w http.ResponseWriter, r *http.Request) {
	if err := h.sessions.Logout(w, r); err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// writeError answers as the API does: {"error": {"code", "message"}}.
func writeError(w http.ResponseWriter, err error) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(errdefs.HTTPStatus(err))
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"code": errdefs.Code(err), "message": err.Error()}})
}
