package store

import (
	"bytes"
	"fmt"
)

// CheckConds is the condition check every backend shares: it returns an
// error wrapping ErrConditionFailed unless each of conds holds, reading
// current values with get (found false: the key is absent). Backends call
// it where the batch is applied, atomically with applying it.
func CheckConds(conds []Cond, get func(key []byte) (value []byte, found bool, err error)) error {
	for _, c := range conds {
		v, found, err := get(c.Key)
		if err != nil {
			return err
		}
		if !holds(c, v, found) {
			return fmt.Errorf("%w: key %q", ErrConditionFailed, c.Key)
		}
	}
	return nil
}

func holds(c Cond, v []byte, found bool) bool {
	if c.Value == nil {
		return !found
	}
	return found && bytes.Equal(v, c.Value)
}

// ValueAfter reports what key holds after ops are applied to a state in
// which it held (base, baseFound): the value of the last operation that
// touches key, or base when none does. A group committer uses it to check
// a batch's conditions against the batches queued before it in the same
// group, which the database has not applied yet.
func ValueAfter(ops []Op, key, base []byte, baseFound bool) ([]byte, bool) {
	v, found := base, baseFound
	for _, op := range ops {
		switch op.Kind {
		case OpSet:
			if bytes.Equal(op.Key, key) {
				v, found = op.Joined(), true
			}
		case OpDelete:
			if bytes.Equal(op.Key, key) {
				v, found = nil, false
			}
		case OpDeleteRange:
			if bytes.Compare(key, op.Key) >= 0 && bytes.Compare(key, op.End) < 0 {
				v, found = nil, false
			}
		}
	}
	return v, found
}
