package server

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"

	"github.com/busbar-io/busbar/store"
)

// sharedKeyRecord is where a cluster keeps its generated root key, in the
// shared store beside the cluster's records ('~c…'), so that every node
// accepts the same connection string.
var sharedKeyRecord = []byte("~ck")

// sharedRootKey returns the cluster's generated root key, generating it if
// no node has yet; created reports whether this call did.
func sharedRootKey(ctx context.Context, st store.Store) (key string, created bool, err error) {
	for {
		v, err := st.Get(ctx, sharedKeyRecord)
		if err == nil {
			return string(v), false, nil
		}
		if !errors.Is(err, store.ErrNotFound) {
			return "", false, err
		}
		raw := make([]byte, 32)
		if _, err := rand.Read(raw); err != nil {
			return "", false, err
		}
		key = base64.StdEncoding.EncodeToString(raw)
		var b store.Batch
		b.Require(sharedKeyRecord, nil)
		b.Set(sharedKeyRecord, []byte(key))
		switch err := st.Commit(ctx, &b); {
		case err == nil:
			return key, true, nil
		case !errors.Is(err, store.ErrConditionFailed):
			return "", false, err
		}
		// Another node generated one meanwhile: read it.
	}
}
