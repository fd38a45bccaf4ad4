package operator

import (
	"fmt"
	"slices"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/parser"
	"github.com/expr-lang/expr/vm"
)

// Expr is one compiled expression (github.com/expr-lang/expr), compiled
// once and run per record. The record's top-level JSON fields are its
// variables, plus _key (string), _timestamp (time.Time, UTC), _topic,
// _partition and _offset.
//
// Missing fields. expr itself reads a missing variable as nil, which turns
// a typo or a malformed record into a silent wrong answer ("n % 2" on a
// record without n would even fail with a confusing nil message). Instead,
// the fields an expression needs are found once, at compile time, by
// walking its syntax tree (let-bound names, function names, predicate
// pointers and $env excepted), and checked per record with one map lookup
// each, so the error says "missing field n" (CodeMissingField). A field
// used only as `x ?? default` or as the base of `x?.y` is optional: that is
// what those operators are for. Nested lookups (user.id) follow expr: a
// missing nested key is nil.
//
// An Expr is immutable and safe for concurrent use; Eval allocates a VM per
// call. Chain and Aggregator keep their own VM for the hot path.
type Expr struct {
	path string
	src  string
	prog *vm.Program
	// decProg is prog with exact decimal operators (decimalexpr.go), run
	// for a record that holds decimals; nil when prog has no operator.
	decProg *vm.Program
	fields  []string // required top-level fields, sorted
	meta    metaMask // meta variables read
	// reads are the top-level fields read, optional ones too, sorted; env
	// says any field may be read. They decide which fields of a record
	// must be decoded for the expression (see Chain's need).
	reads []string
	env   bool
	// within is the set of fields the chain that owns the expression
	// decodes, which covers reads; nil for an expression of no chain.
	within *fieldSet
	// field is set when the expression is nothing but one top-level
	// field (key_by: user, sum(amount)): run then reads it from the
	// record directly, which is what the program would do, without the
	// VM.
	field string
}

// exprKind says what a step expects from an expression at compile time.
type exprKind uint8

const (
	exprAny exprKind = 1 + iota
	exprBool
)

// CompileExpr compiles src; path names it in errors ("sinks[0].key").
func CompileExpr(path, src string) (*Expr, error) {
	e, err := compileExpr(path, src, exprAny)
	if err != nil {
		return nil, err
	}
	return e, nil
}

func compileExpr(path, src string, kind exprKind) (e *Expr, ce *CompileError) {
	// Configuration text reaches a third-party parser here; a panic in it
	// must become a config error, not a crash of `pipeline validate`.
	defer func() {
		if p := recover(); p != nil {
			e, ce = nil, &CompileError{Path: path, Step: -1, Message: fmt.Sprintf("cannot compile expression: %v", p)}
		}
	}()
	cerr := func(err error) *CompileError {
		msg, line, col := exprMessage(err)
		return &CompileError{Path: path, Step: -1, Line: line, Column: col, Message: msg}
	}
	tree, err := parser.Parse(src)
	if err != nil {
		return nil, cerr(err)
	}
	fv := freeVars{src: src}
	if ce := fv.walk(tree.Node, nil, false); ce != nil {
		ce.Path = path
		return nil, ce
	}
	opts := []expr.Option{
		// A map env makes expr load variables with one map index
		// (OpLoadFast); undefined variables are allowed because records
		// define them, and checked by the walk above instead.
		expr.Env(map[string]any{}),
		expr.AllowUndefinedVariables(),
		// Refused by the walk above too, with a better message.
		expr.DisableBuiltin("now"),
		expr.Timezone("UTC"),
	}
	if kind == exprBool {
		// AsBool finds "1 + 1" at compile time, but at run time it would
		// also turn null into false: a filter on a null field silently
		// dropping records. So it only checks; the program that runs has
		// no cast, and the step checks the result's type per record.
		if _, err := expr.Compile(src, append(opts, expr.AsBool())...); err != nil {
			return nil, cerr(err)
		}
		// AsBool cannot type "n + 1": n is a field, of no known type.
		if neverBool(tree.Node) {
			const msg = "expected bool, but its result is never true or false: a filter needs a condition, such as a comparison"
			ce := &CompileError{Step: -1, Line: 1, Column: 1, Message: msg}
			switch tree.Node.(type) {
			case *ast.BinaryNode, *ast.UnaryNode:
				ce = posError(src, tree.Node, msg) // at the operator
			}
			ce.Path = path
			return nil, ce
		}
	}
	prog, err := expr.Compile(src, opts...)
	if err != nil {
		return nil, cerr(err)
	}
	slices.Sort(fv.fields)
	slices.Sort(fv.reads)
	e = &Expr{path: path, src: src, prog: prog, fields: slices.Compact(fv.fields), meta: fv.meta,
		reads: slices.Compact(fv.reads), env: fv.env}
	if hasDecimalOps(tree.Node) {
		if dp, err := expr.Compile(src, append(opts, decimalOptions()...)...); err == nil {
			e.decProg = dp
		}
	}
	if id, ok := tree.Node.(*ast.IdentifierNode); ok && len(e.fields) == 1 && e.fields[0] == id.Value {
		e.field = id.Value
	}
	return e, nil
}

// Path is the config path the expression came from.
func (e *Expr) Path() string { return e.path }

// Source is the expression text.
func (e *Expr) Source() string { return e.src }

// Fields are the top-level fields a record must have for the expression to
// run, sorted.
func (e *Expr) Fields() []string { return slices.Clone(e.fields) }

// Eval runs the expression on r (decoding r first if needed). The result is
// expr's own value (it may need normalizing before it is JSON).
func (e *Expr) Eval(r *Record) (any, *RecordError) {
	var (
		m vm.VM
		d decoder
	)
	if err := r.decode(&d, e.path); err != nil {
		return nil, err
	}
	return e.run(&m, r)
}

// EvalKey is Eval followed by KeyString, for key expressions (a sink's
// key): any error, including a result that is not a scalar, names the
// expression's path.
func (e *Expr) EvalKey(r *Record) (string, *RecordError) {
	v, err := e.Eval(r)
	if err != nil {
		return "", err
	}
	k, kerr := KeyString(v)
	if kerr != nil {
		return "", kerr.withStep(e.path)
	}
	return k, nil
}

// run evaluates on a decoded record with the caller's VM.
func (e *Expr) run(m *vm.VM, r *Record) (any, *RecordError) {
	if r.partial != nil && !r.partial.covers(e) {
		// The chain decoded only the fields its own expressions read;
		// this one (a sink key, say) reads others.
		if err := r.decodeAll(e.path); err != nil {
			return nil, err
		}
	}
	if e.field != "" {
		// e.fields is just this field: one lookup checks and reads it.
		if v, ok := r.field(e.field); ok {
			return v, nil
		}
		return nil, &RecordError{Step: e.path, Code: CodeMissingField, Reason: "missing field " + e.field}
	}
	for _, f := range e.fields {
		if _, ok := r.field(f); !ok {
			return nil, &RecordError{Step: e.path, Code: CodeMissingField, Reason: "missing field " + f}
		}
	}
	env := r.env(nil)
	if e.meta != 0 {
		r.setMeta(e.meta)
		env = r.fields // a copy of a shared map, if setMeta made one
	}
	if len(r.joined) > 0 && e.readsJoined(r) {
		var hid []hidden
		env, hid = r.overlayJoined()
		defer r.restoreJoined(hid)
	}
	prog := e.prog
	if r.decimals && e.decProg != nil {
		prog = e.decProg
	}
	out, err := m.Run(prog, env)
	if err != nil {
		msg, _, _ := exprMessage(err)
		return nil, &RecordError{Step: e.path, Code: CodeEval, Reason: msg}
	}
	return out, nil
}

// freeVars collects what an expression reads from its environment.
type freeVars struct {
	src    string
	fields []string
	meta   metaMask
	// reads are all top-level fields read, the optional ones too; env says
	// the expression may read any field ($env, or a node this walk does
	// not know).
	reads []string
	env   bool
}

// walk visits the tree. scope holds the let-bound names in effect;
// optional says the node is the left of ?? or the base of ?. (a missing
// field there is not an error).
func (fv *freeVars) walk(n ast.Node, scope []string, optional bool) *CompileError {
	switch n := n.(type) {
	case nil:
	case *ast.IdentifierNode:
		name := n.Value
		if name == "$env" {
			fv.env = true
			return nil
		}
		if slices.Contains(scope, name) {
			return nil
		}
		if bit := metaBit(name); bit != 0 {
			fv.meta |= bit
			return nil
		}
		fv.reads = append(fv.reads, name)
		if !optional {
			fv.fields = append(fv.fields, name)
		}
	case *ast.UnaryNode:
		return fv.walk(n.Node, scope, false)
	case *ast.BinaryNode:
		if err := fv.walk(n.Left, scope, n.Operator == "??"); err != nil {
			return err
		}
		return fv.walk(n.Right, scope, false)
	case *ast.ChainNode:
		return fv.walk(n.Node, scope, optional)
	case *ast.MemberNode:
		if err := fv.walk(n.Node, scope, optional || n.Optional); err != nil {
			return err
		}
		return fv.walk(n.Property, scope, false)
	case *ast.SliceNode:
		for _, c := range []ast.Node{n.Node, n.From, n.To} {
			if err := fv.walk(c, scope, false); err != nil {
				return err
			}
		}
	case *ast.CallNode:
		// A plain name called is not a field. With no custom functions,
		// the parser only makes a CallNode of a name it does not know;
		// expr would fail on it per record ("cannot call nil").
		if id, ok := n.Callee.(*ast.IdentifierNode); ok {
			return posError(fv.src, id, "unknown function "+id.Value+"()")
		}
		if err := fv.walk(n.Callee, scope, false); err != nil {
			return err
		}
		for _, a := range n.Arguments {
			if err := fv.walk(a, scope, false); err != nil {
				return err
			}
		}
	case *ast.BuiltinNode:
		if n.Name == "now" {
			// now() would make a replay after a crash compute other results
			// than the first run: exactly-once needs determinism.
			return posError(fv.src, n, "now() is not available: a replay would compute different results; use _timestamp, the record's time")
		}
		for _, a := range n.Arguments {
			if err := fv.walk(a, scope, false); err != nil {
				return err
			}
		}
	case *ast.PredicateNode:
		return fv.walk(n.Node, scope, false)
	case *ast.ConditionalNode:
		for _, c := range []ast.Node{n.Cond, n.Exp1, n.Exp2} {
			if err := fv.walk(c, scope, false); err != nil {
				return err
			}
		}
	case *ast.VariableDeclaratorNode:
		if err := fv.walk(n.Value, scope, false); err != nil {
			return err
		}
		return fv.walk(n.Expr, append(slices.Clip(scope), n.Name), false)
	case *ast.SequenceNode:
		for _, c := range n.Nodes {
			if err := fv.walk(c, scope, false); err != nil {
				return err
			}
		}
	case *ast.ArrayNode:
		for _, c := range n.Nodes {
			if err := fv.walk(c, scope, false); err != nil {
				return err
			}
		}
	case *ast.MapNode:
		for _, c := range n.Pairs {
			if err := fv.walk(c, scope, false); err != nil {
				return err
			}
		}
	case *ast.PairNode:
		if err := fv.walk(n.Key, scope, false); err != nil {
			return err
		}
		return fv.walk(n.Value, scope, false)
	case *ast.NilNode, *ast.IntegerNode, *ast.FloatNode, *ast.BoolNode, *ast.StringNode,
		*ast.BytesNode, *ast.ConstantNode, *ast.PointerNode:
		// Literals and predicate pointers (#, #index) read nothing.
	default:
		// A node this walk does not know (a newer expr): it may read any
		// field, so the record is decoded whole for it.
		fv.env = true
	}
	return nil
}

// neverBool reports whether n cannot give true or false whatever the
// record holds, even where expr's checker cannot tell, since fields have
// no type before a record arrives: arithmetic (n + 1, -n) never does, nor a
// choice (??, ?:, let) whose every outcome is arithmetic or a literal that
// is not a bool.
func neverBool(n ast.Node) bool {
	switch n := n.(type) {
	case *ast.BinaryNode:
		switch n.Operator {
		case "+", "-", "*", "/", "%", "**", "^", "..":
			return true
		case "??":
			return neverBool(n.Left) && neverBool(n.Right)
		}
	case *ast.UnaryNode:
		return n.Operator == "-" || n.Operator == "+"
	case *ast.ConditionalNode:
		return neverBool(n.Exp1) && neverBool(n.Exp2)
	case *ast.VariableDeclaratorNode:
		return neverBool(n.Expr)
	case *ast.IntegerNode, *ast.FloatNode, *ast.StringNode, *ast.BytesNode,
		*ast.ArrayNode, *ast.MapNode, *ast.NilNode:
		return true
	}
	return false
}

// posError is a compile error at a node of the expression src.
func posError(src string, n ast.Node, msg string) *CompileError {
	line, col := runePosition(src, n.Location().From)
	return &CompileError{Step: -1, Line: line, Column: col, Message: msg}
}

// runePosition turns expr's rune offset into a 1-based line and column.
func runePosition(src string, from int) (line, col int) {
	line, col = 1, 1
	i := 0
	for _, r := range src {
		if i == from {
			break
		}
		if r == '\n' {
			line++
			col = 1
		} else {
			col++
		}
		i++
	}
	return line, col
}
