package broker

import (
	"strings"
	"testing"
)

// Properties Service Bus does not let an update change are refused with
// the service's texts, which the SDKs' tests match.
func TestImmutablePropertiesTexts(t *testing.T) {
	e := newEnv(t)
	e.queue("q", QueueProperties{})
	for _, c := range []struct {
		p    QueueProperties
		want string
	}{
		{QueueProperties{RequiresSession: true}, "The value for the RequiresSession property of an existing Queue cannot be changed"},
		{QueueProperties{EnablePartitioning: true}, "Partitioning cannot be changed for Queue. "},
		{QueueProperties{RequiresDuplicateDetection: true}, "The value for the RequiresDuplicateDetection property of an existing Queue cannot be changed"},
	} {
		err := e.b.UpdateQueue(e.ctx, "q", c.p)
		wantErr(t, err, ErrInvalidArgument)
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("update %+v: %v, want %q", c.p, err, c.want)
		}
	}
}
