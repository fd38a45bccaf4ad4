package schema

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/twmb/franz-go/pkg/sr"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/eoflow/pipeline/operator"
)

// JSON Schema. The data after the framing is JSON text; it is decoded as
// a json record is (exact integers, other numbers float64, UTF-8 checked)
// and must be valid against its schema, compiled once by
// santhosh-tekuri/jsonschema (drafts 4 to 2020-12, the draft its $schema
// names; 2020-12 without one), with the schemas it references. A value
// that is not valid is a schema error naming what failed where.

// jsonFile is a compiled JSON Schema.
type jsonFile struct {
	schema *jsonschema.Schema
}

const jsonSchemaMain = "mem://schema.json"

func compileJSONSchema(text string, refs []sr.SubjectSchema) (*jsonFile, error) {
	c := jsonschema.NewCompiler()
	c.UseLoader(noLoader{}) // never fetch a $ref from the network
	add := func(name, text string) error {
		doc, err := jsonschema.UnmarshalJSON(strings.NewReader(text))
		if err != nil {
			return err
		}
		return c.AddResource(name, doc)
	}
	for _, r := range refs {
		if err := add(r.Subject, r.Schema.Schema); err != nil {
			return nil, fmt.Errorf("referenced schema %s: %w", r.Subject, err)
		}
	}
	if err := add(jsonSchemaMain, text); err != nil {
		return nil, err
	}
	s, err := c.Compile(jsonSchemaMain)
	if err != nil {
		return nil, err
	}
	return &jsonFile{schema: s}, nil
}

type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("%s: references are resolved through the registry only", url)
}

// decode reads and validates a JSON object.
func (j *jsonFile) decode(b []byte) (map[string]any, []string, error) {
	m, err := operator.DecodeJSONObject(b)
	if err != nil {
		return nil, nil, err
	}
	if err := j.schema.Validate(m); err != nil {
		return nil, nil, validationError(err)
	}
	return m, sortedKeys(m), nil
}

// decodeValue reads and validates any JSON value (a key).
func (j *jsonFile) decodeValue(b []byte) (any, error) {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	if err := j.schema.Validate(v); err != nil {
		return nil, validationError(err)
	}
	return operator.DecodeJSONValue(b)
}

// validate checks JSON text against the schema.
func (j *jsonFile) validate(js []byte) error {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(js))
	if err != nil {
		return err
	}
	if err := j.schema.Validate(v); err != nil {
		return validationError(err)
	}
	return nil
}

// english prints the validator's messages.
var english = message.NewPrinter(language.English)

// validationError is the first leaf of a validation error, on one line.
func validationError(err error) error {
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return err
	}
	for len(ve.Causes) > 0 {
		ve = ve.Causes[0]
	}
	msg := strings.ReplaceAll(ve.ErrorKind.LocalizedString(english), "\n", " ")
	return &jsonLocationError{at: slices.Clone(ve.InstanceLocation), msg: msg}
}

// jsonLocationError is a value not valid against a JSON Schema: what
// failed (msg) where in the value (at, its instance location).
type jsonLocationError struct {
	at  []string
	msg string
}

func (e *jsonLocationError) Error() string {
	return fmt.Sprintf("not valid against the JSON Schema at /%s: %s", strings.Join(e.at, "/"), e.msg)
}

// requiredFields are the names a derived schema requires, in order.
func requiredFields(d *derived) []string {
	var names []string
	for _, f := range d.fields {
		if !f.t.nullable {
			names = append(names, f.name)
		}
	}
	return slices.Clip(names)
}
