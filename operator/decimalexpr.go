package operator

import (
	"errors"
	"math/big"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/builtin"
	"github.com/expr-lang/expr/vm/runtime"
)

// Decimals in expressions. expr's operators know Go's numbers only, so an
// expression over a Decimal (an Avro decimal field) has a second program
// in which every arithmetic and comparison operator, unary minus and the
// float, int, string and abs builtins are calls of the functions below:
// they compute exactly with Decimals and integers, and hand anything else
// to expr's own operators, unchanged. Expr.run takes that program only
// for a record whose decoding produced decimals, so JSON records never
// pay for it.
//
//   - + - * of Decimals and integers are exact Decimals; with a float64
//     they are float64 (as SQL turns decimal + float into float).
//   - / is a float64, as expr's / always is.
//   - % of Decimals is exact when both are whole numbers.
//   - comparisons are exact; a float64 compares as its decimal of 15
//     significant digits (as the aggregates take it), so amount > 100.5
//     holds for 100.51 and not for 100.50.

// decimalFuncs are the operator functions, by operator.
var decimalFuncs = map[string]string{
	"+": "_dec_add", "-": "_dec_sub", "*": "_dec_mul", "/": "_dec_div", "%": "_dec_mod",
	"<": "_dec_lt", ">": "_dec_gt", "<=": "_dec_le", ">=": "_dec_ge", "==": "_dec_eq", "!=": "_dec_ne",
}

// decimalBuiltins are the builtins taken over, by name.
var decimalBuiltins = map[string]string{"float": "_dec_float", "int": "_dec_int", "string": "_dec_string", "abs": "_dec_abs"}

// decimalPatcher rewrites a tree for the decimal program.
type decimalPatcher struct{}

func (decimalPatcher) Visit(node *ast.Node) {
	switch n := (*node).(type) {
	case *ast.BinaryNode:
		if fn, ok := decimalFuncs[n.Operator]; ok {
			ast.Patch(node, &ast.CallNode{Callee: &ast.IdentifierNode{Value: fn}, Arguments: []ast.Node{n.Left, n.Right}})
		}
	case *ast.UnaryNode:
		if n.Operator == "-" {
			ast.Patch(node, &ast.CallNode{Callee: &ast.IdentifierNode{Value: "_dec_neg"}, Arguments: []ast.Node{n.Node}})
		}
	case *ast.BuiltinNode:
		if fn, ok := decimalBuiltins[n.Name]; ok && len(n.Arguments) == 1 {
			ast.Patch(node, &ast.CallNode{Callee: &ast.IdentifierNode{Value: fn}, Arguments: n.Arguments})
		}
	}
}

// hasDecimalOps reports whether the tree has anything decimalPatcher
// rewrites: an expression without it needs no second program.
func hasDecimalOps(n ast.Node) bool {
	found := false
	ast.Walk(&n, visitFunc(func(node *ast.Node) {
		switch x := (*node).(type) {
		case *ast.BinaryNode:
			_, ok := decimalFuncs[x.Operator]
			found = found || ok
		case *ast.UnaryNode:
			found = found || x.Operator == "-"
		case *ast.BuiltinNode:
			_, ok := decimalBuiltins[x.Name]
			found = found || ok
		}
	}))
	return found
}

type visitFunc func(*ast.Node)

func (f visitFunc) Visit(n *ast.Node) { f(n) }

// decimalOptions are the compile options of the decimal program.
func decimalOptions() []expr.Option {
	opts := []expr.Option{expr.Patch(decimalPatcher{})}
	binary := func(name string, fn func(a, b any) (any, error)) {
		opts = append(opts, expr.Function(name, func(p ...any) (any, error) { return fn(p[0], p[1]) }))
	}
	arith := func(op byte, plain func(a, b any) any) func(a, b any) (any, error) {
		return func(a, b any) (any, error) {
			x, y, ok := decimalOperands(a, b)
			if !ok {
				return plain(a, b), nil
			}
			if x.isFloat || y.isFloat {
				return plain(floatOperand(a), floatOperand(b)), nil
			}
			switch op {
			case '+':
				return Decimal{x.d.add(y.d)}, nil
			case '-':
				return Decimal{x.d.add(y.d.neg())}, nil
			}
			return decimalMul(x.d, y.d)
		}
	}
	binary("_dec_add", arith('+', runtime.Add))
	binary("_dec_sub", arith('-', runtime.Subtract))
	binary("_dec_mul", arith('*', runtime.Multiply))
	binary("_dec_div", func(a, b any) (any, error) { return runtime.Divide(floatOperand(a), floatOperand(b)), nil })
	binary("_dec_mod", func(a, b any) (any, error) {
		if _, _, ok := decimalOperands(a, b); !ok {
			return runtime.Modulo(a, b), nil
		}
		return runtime.Modulo(intOperand(a), intOperand(b)), nil
	})
	cmp := func(test func(int) bool, plain func(a, b any) bool) func(a, b any) (any, error) {
		return func(a, b any) (any, error) {
			x, y, ok := decimalOperands(a, b)
			if !ok {
				return plain(a, b), nil
			}
			return test(x.exact().cmp(y.exact())), nil
		}
	}
	binary("_dec_lt", cmp(func(c int) bool { return c < 0 }, runtime.Less))
	binary("_dec_gt", cmp(func(c int) bool { return c > 0 }, runtime.More))
	binary("_dec_le", cmp(func(c int) bool { return c <= 0 }, runtime.LessOrEqual))
	binary("_dec_ge", cmp(func(c int) bool { return c >= 0 }, runtime.MoreOrEqual))
	binary("_dec_eq", cmp(func(c int) bool { return c == 0 }, runtime.Equal))
	binary("_dec_ne", cmp(func(c int) bool { return c != 0 }, func(a, b any) bool { return !runtime.Equal(a, b) }))
	unary := func(name string, fn func(a any) (any, error)) {
		opts = append(opts, expr.Function(name, func(p ...any) (any, error) { return fn(p[0]) }))
	}
	unary("_dec_neg", func(a any) (any, error) {
		if d, ok := a.(Decimal); ok {
			return Decimal{d.d.neg()}, nil
		}
		return runtime.Negate(a), nil
	})
	unary("_dec_float", func(a any) (any, error) { return builtin.Float(floatOperand(a)), nil })
	unary("_dec_int", func(a any) (any, error) { return builtin.Int(floatOperand(a)), nil }) // truncated, as int(1.9) is 1
	unary("_dec_string", func(a any) (any, error) {
		if d, ok := a.(Decimal); ok {
			return d.String(), nil
		}
		return builtin.String(a), nil
	})
	unary("_dec_abs", func(a any) (any, error) {
		if d, ok := a.(Decimal); ok {
			if d.d.cmp(decimal{}) < 0 {
				return Decimal{d.d.neg()}, nil
			}
			return d, nil
		}
		return builtin.Abs(a), nil
	})
	return opts
}

// operand is one side of a decimal operation.
type operand struct {
	d       decimal
	f       float64
	isFloat bool
}

// exact is the operand as a decimal (a float by its 15 digits).
func (o operand) exact() decimal {
	if o.isFloat {
		return decimalOfFloat(o.f)
	}
	return o.d
}

// decimalOperands takes a and b when at least one is a Decimal and the
// other a number; ok false hands them to expr's operators.
func decimalOperands(a, b any) (x, y operand, ok bool) {
	_, da := a.(Decimal)
	_, db := b.(Decimal)
	if !da && !db {
		return x, y, false
	}
	x, ok1 := operandOf(a)
	y, ok2 := operandOf(b)
	return x, y, ok1 && ok2
}

func operandOf(v any) (operand, bool) {
	if d, ok := v.(Decimal); ok {
		return operand{d: d.d}, true
	}
	n, ok := toNumber(v)
	if !ok {
		return operand{}, false
	}
	if n.isFloat {
		return operand{f: n.f, isFloat: true}, true
	}
	return operand{d: decimal{small: n.i}}, true
}

// floatOperand is a Decimal as its float64, anything else as it is.
func floatOperand(v any) any {
	if d, ok := v.(Decimal); ok {
		return d.Float64()
	}
	return v
}

// intOperand is a whole Decimal as an int (others unchanged: expr then
// reports the operation on a fraction).
func intOperand(v any) any {
	if d, ok := v.(Decimal); ok {
		if i, ok := d.Int64(); ok {
			return int(i)
		}
		return d.Float64()
	}
	return v
}

// neg is -d.
func (d decimal) neg() decimal {
	if d.big == nil && d.small != -1<<63 {
		return decimal{small: -d.small, scale: d.scale}
	}
	z := d.coef(0)
	return makeDecimal(z.Neg(z), d.scale)
}

var errDecimalScaleProduct = errors.New("product of decimals has more digits after the point than a decimal holds")

// decimalMul is x × y, exact.
func decimalMul(x, y decimal) (any, error) {
	scale := int(x.scale) + int(y.scale)
	if scale > maxScale {
		return nil, errDecimalScaleProduct
	}
	z := new(big.Int).Mul(x.coef(0), y.coef(0))
	return Decimal{makeDecimal(z, uint16(scale))}, nil
}
