// Package filter implements the Azure Service Bus subscription rule language:
// SQL filters (a SQL-92 subset with three-valued logic), correlation filters,
// the TRUE/FALSE filters and SQL rule actions (SET / REMOVE statements).
//
// The package owns the lexer, parser, normalized rendering (String) and
// evaluator of that language and nothing else. It must not touch storage,
// AMQP encoding or the broker's message representation, and it does no I/O:
// the broker adapts its messages to the Message and MutableMessage
// interfaces declared here and decides what to do with a match, a non-match
// or an *EvalError (for example, dead-lettering when the subscription asks
// for it).
//
// Filters and actions are parsed once (ParseSQL, ParseAction) into a tree of
// closures that is immutable, safe for concurrent use and allocation-free
// on the common paths.
//
// # Semantics
//
// The grammar is the one of the Service Bus documentation ("SQL filter
// syntax", "SQL rule action syntax"); keywords and function names are
// case-insensitive, user property names case-sensitive, system property names
// (sys.Label, sys.subject, ...) case-insensitive. Unqualified names are user
// properties. Integer literals are long (int64); decimal and exponent
// literals are double.
//
//   - Unknown: a missing user property, NULL, or a nil value is unknown.
//     Arithmetic, comparison, LIKE and IN with an unknown operand are
//     unknown; AND and OR follow SQL's three-valued truth tables (FALSE
//     dominates AND, TRUE dominates OR); NOT unknown is unknown. A filter
//     matches only when it evaluates to TRUE.
//   - A system property name the message does not know and that is not a
//     Service Bus system property is an *EvalError; a known system property
//     the message lacks is unknown.
//   - Numbers follow C#'s binary numeric promotion: sbyte, byte, short and
//     ushort widen to int; int with uint gives long; any float or double
//     gives double (float with float stays float). Integer arithmetic wraps
//     at the width of the promoted type; integer division by zero is an
//     *EvalError; double division by zero gives infinity. Mixing ulong with
//     a signed type (a C# compile error) compares by value.
//   - + concatenates when either side is a string, rendering the other side
//     as C#'s ToString does. DateTime and TimeSpan support + and - as in C#.
//   - = and <> compare numbers across types, strings ordinally and
//     case-sensitively, and guids with guids or their text; values of
//     unrelated types are unequal. <, <=, >, >= order numbers, DateTimes and
//     TimeSpans; ordering anything else is an *EvalError.
//   - AND and OR evaluate left to right and stop as soon as the result is
//     known, so "FALSE AND sys.Bogus = 1" is FALSE, not an error.
//   - LIKE matches by character, case-sensitively; NULL items of an IN list
//     never match.
//
// Limits keep hostile expressions cheap: MaxExpressionLength, MaxNesting,
// MaxActionStatements and MaxStringLength.
package filter
