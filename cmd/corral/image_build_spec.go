package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"

	"corral/pkg/apiv1"
)

// defaultSpecFile is the spec `corral image build` reads without -f.
const defaultSpecFile = "corral.yaml"

// buildSpecFile is a parsed spec and where its relative paths start.
type buildSpecFile struct {
	name string // the file as given, or "stdin", for messages
	dir  string // relative copy sources and bases resolve against it
	spec apiv1.BuildSpec
}

// loadSpec reads a spec file (YAML or JSON); "-" reads stdin, whose
// relative paths resolve against the current directory.
func loadSpec(file string, stdin io.Reader) (*buildSpecFile, error) {
	sf := &buildSpecFile{name: file, dir: filepath.Dir(file)}
	var data []byte
	var err error
	if file == "-" {
		sf.name, sf.dir = "stdin", "."
		data, err = io.ReadAll(stdin)
	} else {
		data, err = os.ReadFile(file)
	}
	if err != nil {
		return nil, fmt.Errorf("reading spec: %w", err)
	}
	if sf.spec, err = parseSpec(data); err != nil {
		return nil, fmt.Errorf("spec %s: %w", sf.name, err)
	}
	return sf, nil
}

// specDoc is a spec whose steps are left for parseSpec to decode.
type specDoc struct {
	apiv1.BuildSpec
	Steps []json.RawMessage `json:"steps,omitempty"`
}

// parseSpec decodes a spec strictly: an unknown key or a duplicate one is
// an error. Steps are decoded one by one so that an error names its step.
func parseSpec(data []byte) (apiv1.BuildSpec, error) {
	js, err := specYAMLToJSON(data)
	if err != nil {
		return apiv1.BuildSpec{}, err
	}
	var doc specDoc
	if err := decodeStrict(js, &doc); err != nil {
		return apiv1.BuildSpec{}, err
	}
	spec := doc.BuildSpec
	spec.Steps = make([]apiv1.BuildStep, len(doc.Steps))
	for i, raw := range doc.Steps {
		if err := decodeStrict(raw, &spec.Steps[i]); err != nil {
			return apiv1.BuildSpec{}, fmt.Errorf("step %d: %w", i+1, err)
		}
	}
	if err := checkSpec(spec); err != nil {
		return apiv1.BuildSpec{}, err
	}
	return spec, nil
}

// decodeStrict decodes JSON refusing unknown fields, without the "json: "
// prefix of encoding/json's messages.
func decodeStrict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" {
		return fmt.Errorf("%s: want %s, not %s", te.Field, kindName(te.Type), jsonValueName(te.Value))
	}
	if err != nil {
		return errors.New(strings.TrimPrefix(err.Error(), "json: "))
	}
	return nil
}

// jsonValueName says what encoding/json's name of a value kind was written
// as in the spec.
func jsonValueName(v string) string {
	switch v {
	case "array":
		return "a list"
	case "object":
		return "a mapping"
	case "bool":
		return "true or false"
	}
	return "a " + v
}

// kindName says what a spec value of type t is written as.
func kindName(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Bool:
		return "true or false"
	case reflect.String:
		return "a string"
	case reflect.Slice:
		return "a list"
	case reflect.Map, reflect.Struct:
		return "a mapping"
	}
	return "a number"
}

// checkSpec checks what the CLI itself acts on; the daemon checks the rest.
func checkSpec(spec apiv1.BuildSpec) error {
	if spec.Base.Debian == "" && spec.Base.Image == "" {
		return errors.New("base is required (debian:SUITE, an image, or a path to an image archive or OCI layout)")
	}
	for i, st := range spec.Steps {
		if st.Copy != nil && (st.Copy.Src == "" || st.Copy.Dst == "") {
			return fmt.Errorf("step %d: copy needs src and dst", i+1)
		}
	}
	return nil
}

// resolvePath makes a spec's relative path relative to the spec's directory.
func (sf *buildSpecFile) resolvePath(p string) string {
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(sf.dir, p)
}
