package operator

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/expr-lang/expr/file"

	"github.com/eoflow/pipeline/config"
)

// Code classifies why a record failed. The values are stable: they are
// metric labels and dead-letter headers, so never rename one.
type Code string

const (
	// CodeDecode: the value is not JSON (invalid UTF-8 in a string
	// included), or not a JSON object.
	CodeDecode Code = "decode"
	// CodeMissingField: an expression names a top-level field the record
	// does not have.
	CodeMissingField Code = "missing_field"
	// CodeEval: the expression failed while running (for example a
	// division by zero, or an operator applied to the wrong types).
	CodeEval Code = "eval"
	// CodeType: the expression ran but its result has the wrong type for
	// the step (a filter that is not bool, an object as a key, a string
	// summed, a number JSON cannot represent).
	CodeType Code = "type"
	// CodeOverflow: an integer sum would leave int64. The state keeps its
	// exact value; the record is rejected instead of silently losing
	// precision. (A decimal sum cannot overflow.)
	CodeOverflow Code = "overflow"
	// CodeFuture: the record's event time is further ahead of the
	// processing time than its source's event_time.max_future allows.
	CodeFuture Code = "future"
	// CodeSchema: a record in a schema registry format names a schema
	// id the registry does not have, its bytes do not match its schema,
	// or an output does not fit the sink's schema. The dead letter's
	// headers carry the schema id (HeaderSchemaID) when there is one.
	CodeSchema Code = "schema"
	// CodeKeyMismatch: a group-mode job that does not repartition
	// (scale.key_by_is_record_key) read a record whose key is not its
	// key_by value, or that is not in its key's partition.
	CodeKeyMismatch Code = "key_mismatch"
)

// Codes lists every Code, for pre-registering metric label values.
func Codes() []Code {
	return []Code{CodeDecode, CodeMissingField, CodeEval, CodeType, CodeOverflow, CodeFuture, CodeSchema, CodeKeyMismatch}
}

// RecordError is why one record could not be processed. It is data, not a
// failure of the job: the runtime sends the record to the dead-letter topic
// with Step, Code and Reason in headers, counts it, and carries on.
type RecordError struct {
	// Step is the config path of the expression or step that failed, e.g.
	// "steps[1].filter" or "steps[3].aggregate.values.sum".
	Step string
	// Code is the stable class of the failure.
	Code Code
	// Reason is a one-line human explanation, e.g. "missing field n".
	Reason string
	// SchemaID is the schema id a CodeSchema failure is about (0: none),
	// for the dead letter's headers.
	SchemaID int
}

func (e *RecordError) Error() string {
	return e.Step + ": " + string(e.Code) + ": " + e.Reason
}

func recordErr(step string, code Code, format string, args ...any) *RecordError {
	return &RecordError{Step: step, Code: code, Reason: fmt.Sprintf(format, args...)}
}

// withStep returns e with Step set, allocating only when it changes.
func (e *RecordError) withStep(step string) *RecordError {
	if e.Step == step {
		return e
	}
	c := *e
	c.Step = step
	return &c
}

// CompileError is a problem with one step found while compiling the chain.
// Compile returns every CompileError it finds, joined with errors.Join, so a
// user fixes the file in one pass. The config loader prefixes it with the
// file position of Path: "config.yaml:12:13: steps[1].filter: ...".
type CompileError struct {
	// Path is the config path, e.g. "steps[1].filter" or
	// "steps[3].aggregate.values.sum".
	Path string
	// Step is the index in the steps list; Kind is the step's kind ("" if
	// the step has none).
	Step int
	Kind config.StepKind
	// Line and Column locate the problem inside the expression text,
	// 1-based; 0 when the problem is not in an expression. A loader that
	// knows where the expression starts can add them to its own position.
	Line, Column int
	// Message says what is wrong.
	Message string
}

func (e *CompileError) Error() string {
	if e.Line > 0 {
		return e.Path + ": " + e.Message + " (expression " + strconv.Itoa(e.Line) + ":" + strconv.Itoa(e.Column) + ")"
	}
	return e.Path + ": " + e.Message
}

// exprMessage strips expr's multi-line snippet: dead-letter headers and
// config errors are one line each, and the caller has the source already.
func exprMessage(err error) (msg string, line, col int) {
	var fe *file.Error
	if errors.As(err, &fe) {
		if fe.Line > 0 {
			// expr's Column is 0-based in runes.
			return fe.Message, fe.Line, fe.Column + 1
		}
		return fe.Message, 0, 0
	}
	return err.Error(), 0, 0
}
