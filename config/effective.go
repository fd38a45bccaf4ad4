package config

import (
	"bytes"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Masked replaces a secret's value in Effective.
const Masked = "********"

// Effective is the configuration as the job runs it, as YAML a job file
// could hold: every ${VAR} replaced and every default applied, fields in
// the order of the reference (docs/configuration.md). Every field tagged
// `secret:"true"` (kafka.sasl.password, schema_registry.password and
// token, admin.token) that is set is replaced by Masked, and its path is
// returned in masked. TLS settings are file paths: the keys in those files
// are never read here.
func (c *Config) Effective() (text []byte, masked []string, err error) {
	e := effective{}
	root := e.value(reflect.ValueOf(*c), "")
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(root); err != nil {
		return nil, nil, fmt.Errorf("effective configuration: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, nil, fmt.Errorf("effective configuration: %w", err)
	}
	return b.Bytes(), e.masked, nil
}

type effective struct{ masked []string }

func scalar(s string) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s}
}

func plain(tag, s string) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: tag, Value: s}
}

// value is v as a YAML node at path (nil: leave it out).
func (e *effective) value(v reflect.Value, path string) *yaml.Node {
	switch v.Type() {
	case durationType:
		return plain("!!str", short(time.Duration(v.Int())))
	case startType:
		sp := v.Interface().(StartPosition)
		if sp.Kind == StartAtTimestamp {
			return scalar(sp.At.Format(time.RFC3339Nano))
		}
		return scalar(string(sp.Kind))
	case fieldsType:
		n := &yaml.Node{Kind: yaml.MappingNode}
		for _, f := range v.Interface().([]Field) {
			n.Content = append(n.Content, scalar(f.Name), scalar(f.Expr))
		}
		return n
	case aggValuesType:
		n := &yaml.Node{Kind: yaml.MappingNode}
		for _, a := range v.Interface().([]AggregateValue) {
			n.Content = append(n.Content, scalar(a.Name), scalar(fmt.Sprintf("%s(%s)", a.Func, a.Arg)))
		}
		return n
	}
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return nil
		}
		return e.value(v.Elem(), path)
	case reflect.Struct:
		return e.structure(v, path)
	case reflect.Slice:
		if v.IsNil() {
			return nil
		}
		n := &yaml.Node{Kind: yaml.SequenceNode}
		for i := range v.Len() {
			if c := e.value(v.Index(i), fmt.Sprintf("%s[%d]", path, i)); c != nil {
				n.Content = append(n.Content, c)
			}
		}
		if v.Type().Elem().Kind() == reflect.String {
			n.Style = yaml.FlowStyle
		}
		return n
	case reflect.String:
		return scalar(v.String())
	case reflect.Bool:
		return plain("!!bool", strconv.FormatBool(v.Bool()))
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return plain("!!int", strconv.FormatInt(v.Int(), 10))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return plain("!!int", strconv.FormatUint(v.Uint(), 10))
	}
	return scalar(fmt.Sprint(v.Interface()))
}

// structure is a struct's yaml-tagged fields as a mapping. A step holds
// only the fields that are set (its one kind, its id, its from).
func (e *effective) structure(v reflect.Value, path string) *yaml.Node {
	n := &yaml.Node{Kind: yaml.MappingNode}
	step := v.Type() == reflect.TypeFor[Step]()
	for i := range v.NumField() {
		f := v.Type().Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "" || name == "-" || !f.IsExported() {
			continue
		}
		fv := v.Field(i)
		p := name
		if path != "" {
			p = path + "." + name
		}
		// What is unset is left out (false stays: auto_register's default
		// is true): written, an empty value can mean more than its absence
		// (a sink's version 0 needs a subject, a schema_file one of the
		// schema formats). admin.listen is empty when it is off.
		if skipSchemaField(v, name) {
			continue
		}
		if fv.IsZero() && (step || fv.Kind() != reflect.Bool) {
			if p == "admin.listen" {
				n.Content = append(n.Content, scalar(name), scalar("off"))
			}
			continue
		}
		var c *yaml.Node
		if f.Tag.Get("secret") == "true" && fv.Kind() == reflect.String {
			c = scalar("")
			if fv.String() != "" {
				c = scalar(Masked)
				e.masked = append(e.masked, p)
			}
		} else {
			c = e.value(fv, p)
		}
		if c != nil {
			n.Content = append(n.Content, scalar(name), c)
		}
	}
	return n
}

// skipSchemaField reports whether field name of v is a sink's schema
// setting while the sink writes no schema format: its default is there,
// but written it would be refused.
func skipSchemaField(v reflect.Value, name string) bool {
	sk, ok := v.Interface().(Sink)
	if !ok || sk.Format.Registered() {
		return false
	}
	switch name {
	case "schema_file", "subject", "version", "subject_strategy", "auto_register":
		return true
	}
	return false
}
