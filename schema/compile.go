package schema

import (
	"context"
	"fmt"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/sr"
)

// compile compiles e's schema for reading, with the schemas it
// references. An error is the reason records naming it cannot be read,
// or ErrUnavailable (a reference could not be fetched).
func (e *entry) compile(ctx context.Context, r *Registry) error {
	var refs []sr.SubjectSchema
	if err := r.references(ctx, e.schema, map[string]bool{}, &refs); err != nil {
		return err
	}
	switch e.schema.Type {
	case sr.TypeAvro:
		s, err := parseAvro(e.schema.Schema, refs)
		if err != nil {
			return fmt.Errorf("schema id %d: %w", e.id, err)
		}
		ar, err := compileAvroReader(s)
		if err != nil {
			return fmt.Errorf("schema id %d: %w", e.id, err)
		}
		e.avro = ar
		return nil
	case sr.TypeProtobuf:
		pf, err := compileProto(e.schema.Schema, refs)
		if err != nil {
			return fmt.Errorf("schema id %d: %w", e.id, err)
		}
		e.proto = pf
		return nil
	case sr.TypeJSON:
		jf, err := compileJSONSchema(e.schema.Schema, refs)
		if err != nil {
			return fmt.Errorf("schema id %d: %w", e.id, err)
		}
		e.json = jf
		return nil
	}
	return fmt.Errorf("schema id %d is a %s schema, which this build does not read", e.id, e.schema.Type)
}

// parseAvro parses an Avro schema after the schemas it references.
func parseAvro(text string, refs []sr.SubjectSchema) (avro.Schema, error) {
	cache := &avro.SchemaCache{}
	for _, ref := range refs {
		if _, err := avro.ParseWithCache(ref.Schema.Schema, "", cache); err != nil {
			return nil, fmt.Errorf("referenced schema %s: %w", ref.Subject, err)
		}
	}
	return avro.ParseWithCache(text, "", cache)
}
