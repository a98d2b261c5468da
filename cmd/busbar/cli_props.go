package main

import (
	"flag"
	"fmt"
	"io"
	"reflect"
	"sort"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"
	"github.com/busbar-io/busbar/isoduration"
)

// propFlags registers flags for the properties of an entity (P is
// admin.QueueProperties, TopicProperties or SubscriptionProperties) and
// applies the ones given on the command line, so that create sets only what
// was asked for and update changes only that.
type propFlags[P any] struct {
	fs    *flag.FlagSet
	apply map[string]func(*P) error
}

func newPropFlags[P any](fs *flag.FlagSet) *propFlags[P] {
	return &propFlags[P]{fs: fs, apply: map[string]func(*P) error{}}
}

func (pf *propFlags[P]) duration(name, usage string, field func(*P) **string) {
	v := pf.fs.String(name, "", usage+" (e.g. 30s, 5m, 14d, PT1M)")
	pf.apply[name] = func(p *P) error {
		d, err := parseDuration(*v)
		if err != nil {
			return usageErrorf("--%s: %v", name, err)
		}
		*field(p) = ptr(isoduration.Format(d))
		return nil
	}
}

func (pf *propFlags[P]) int32(name, usage string, field func(*P) **int32) {
	v := pf.fs.Int(name, 0, usage)
	pf.apply[name] = func(p *P) error {
		if *v < 0 || *v > 1<<31-1 {
			return usageErrorf("--%s: %d is out of range", name, *v)
		}
		*field(p) = ptr(int32(*v))
		return nil
	}
}

func (pf *propFlags[P]) int64(name, usage string, field func(*P) **int64) {
	v := pf.fs.Int64(name, 0, usage)
	pf.apply[name] = func(p *P) error {
		*field(p) = ptr(*v)
		return nil
	}
}

func (pf *propFlags[P]) boolean(name, usage string, field func(*P) **bool) {
	v := pf.fs.Bool(name, false, usage+" (--"+name+"=false to turn off)")
	pf.apply[name] = func(p *P) error {
		*field(p) = ptr(*v)
		return nil
	}
}

func (pf *propFlags[P]) str(name, usage string, field func(*P) **string) {
	v := pf.fs.String(name, "", usage)
	pf.apply[name] = func(p *P) error {
		*field(p) = ptr(*v)
		return nil
	}
}

func (pf *propFlags[P]) status(field func(*P) **admin.EntityStatus) {
	v := pf.fs.String("status", "", "entity status: Active, Disabled, SendDisabled or ReceiveDisabled")
	pf.apply["status"] = func(p *P) error {
		for _, s := range []admin.EntityStatus{admin.EntityStatusActive, admin.EntityStatusDisabled, admin.EntityStatusSendDisabled, admin.EntityStatusReceiveDisabled} {
			if strings.EqualFold(*v, string(s)) {
				*field(p) = ptr(s)
				return nil
			}
		}
		return usageErrorf("--status: %q is not Active, Disabled, SendDisabled or ReceiveDisabled", *v)
	}
}

// applyTo sets on p every property whose flag was given; it reports
// whether there was any.
func (pf *propFlags[P]) applyTo(p *P) (bool, error) {
	set := setFlags(pf.fs)
	any := false
	names := make([]string, 0, len(pf.apply))
	for n := range pf.apply {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if !set[n] {
			continue
		}
		any = true
		if err := pf.apply[n](p); err != nil {
			return false, err
		}
	}
	return any, nil
}

// queuePropFlags registers the flags of a queue's properties.
func queuePropFlags(fs *flag.FlagSet) *propFlags[admin.QueueProperties] {
	pf := newPropFlags[admin.QueueProperties](fs)
	type P = admin.QueueProperties
	pf.duration("lock-duration", "peek-lock duration", func(p *P) **string { return &p.LockDuration })
	pf.int32("max-delivery-count", "deliveries before a message is dead-lettered", func(p *P) **int32 { return &p.MaxDeliveryCount })
	pf.duration("ttl", "default message time to live", func(p *P) **string { return &p.DefaultMessageTimeToLive })
	pf.boolean("sessions", "require sessions", func(p *P) **bool { return &p.RequiresSession })
	pf.boolean("duplicate-detection", "detect duplicate message ids", func(p *P) **bool { return &p.RequiresDuplicateDetection })
	pf.duration("duplicate-window", "duplicate detection history window", func(p *P) **string { return &p.DuplicateDetectionHistoryTimeWindow })
	pf.boolean("dead-letter-on-expiration", "dead-letter expired messages", func(p *P) **bool { return &p.DeadLetteringOnMessageExpiration })
	pf.str("forward-to", "forward every message to this queue or topic (\"\" to stop)", func(p *P) **string { return &p.ForwardTo })
	pf.str("forward-dlq-to", "forward dead-lettered messages to this queue or topic (\"\" to stop)", func(p *P) **string { return &p.ForwardDeadLetteredMessagesTo })
	pf.duration("auto-delete-on-idle", "delete the queue after this long idle", func(p *P) **string { return &p.AutoDeleteOnIdle })
	pf.int32("max-size-mb", "maximum size in megabytes", func(p *P) **int32 { return &p.MaxSizeInMegabytes })
	pf.int64("max-message-size-kb", "maximum message size in kilobytes", func(p *P) **int64 { return &p.MaxMessageSizeInKilobytes })
	pf.str("user-metadata", "free-form metadata", func(p *P) **string { return &p.UserMetadata })
	pf.status(func(p *P) **admin.EntityStatus { return &p.Status })
	return pf
}

// topicPropFlags registers the flags of a topic's properties.
func topicPropFlags(fs *flag.FlagSet) *propFlags[admin.TopicProperties] {
	pf := newPropFlags[admin.TopicProperties](fs)
	type P = admin.TopicProperties
	pf.duration("ttl", "default message time to live", func(p *P) **string { return &p.DefaultMessageTimeToLive })
	pf.boolean("duplicate-detection", "detect duplicate message ids", func(p *P) **bool { return &p.RequiresDuplicateDetection })
	pf.duration("duplicate-window", "duplicate detection history window", func(p *P) **string { return &p.DuplicateDetectionHistoryTimeWindow })
	pf.duration("auto-delete-on-idle", "delete the topic after this long idle", func(p *P) **string { return &p.AutoDeleteOnIdle })
	pf.boolean("support-ordering", "keep messages in order", func(p *P) **bool { return &p.SupportOrdering })
	pf.int32("max-size-mb", "maximum size in megabytes", func(p *P) **int32 { return &p.MaxSizeInMegabytes })
	pf.int64("max-message-size-kb", "maximum message size in kilobytes", func(p *P) **int64 { return &p.MaxMessageSizeInKilobytes })
	pf.str("user-metadata", "free-form metadata", func(p *P) **string { return &p.UserMetadata })
	pf.status(func(p *P) **admin.EntityStatus { return &p.Status })
	return pf
}

// subscriptionPropFlags registers the flags of a subscription's properties.
func subscriptionPropFlags(fs *flag.FlagSet) *propFlags[admin.SubscriptionProperties] {
	pf := newPropFlags[admin.SubscriptionProperties](fs)
	type P = admin.SubscriptionProperties
	pf.duration("lock-duration", "peek-lock duration", func(p *P) **string { return &p.LockDuration })
	pf.int32("max-delivery-count", "deliveries before a message is dead-lettered", func(p *P) **int32 { return &p.MaxDeliveryCount })
	pf.duration("ttl", "default message time to live", func(p *P) **string { return &p.DefaultMessageTimeToLive })
	pf.boolean("sessions", "require sessions", func(p *P) **bool { return &p.RequiresSession })
	pf.boolean("dead-letter-on-expiration", "dead-letter expired messages", func(p *P) **bool { return &p.DeadLetteringOnMessageExpiration })
	pf.boolean("dead-letter-on-filter-error", "dead-letter messages whose rule evaluation fails", func(p *P) **bool {
		return &p.EnableDeadLetteringOnFilterEvaluationExceptions
	})
	pf.str("forward-to", "forward every message to this queue or topic (\"\" to stop)", func(p *P) **string { return &p.ForwardTo })
	pf.str("forward-dlq-to", "forward dead-lettered messages to this queue or topic (\"\" to stop)", func(p *P) **string { return &p.ForwardDeadLetteredMessagesTo })
	pf.duration("auto-delete-on-idle", "delete the subscription after this long idle", func(p *P) **string { return &p.AutoDeleteOnIdle })
	pf.str("user-metadata", "free-form metadata", func(p *P) **string { return &p.UserMetadata })
	pf.status(func(p *P) **admin.EntityStatus { return &p.Status })
	return pf
}

// propRows writes one "Field  value" row per set field of a properties
// struct (nil pointers and empty slices are left out; durations in ISO 8601
// are shown with their Go reading too).
func propRows(w io.Writer, v any) {
	rv := reflect.Indirect(reflect.ValueOf(v))
	rt := rv.Type()
	for i := range rt.NumField() {
		f, fv := rt.Field(i), rv.Field(i)
		if !f.IsExported() {
			continue
		}
		if f.Anonymous && fv.Kind() == reflect.Struct {
			propRows(w, fv.Interface())
			continue
		}
		switch fv.Kind() {
		case reflect.Pointer, reflect.Interface:
			if fv.IsNil() {
				continue
			}
			fv = fv.Elem()
		case reflect.Slice, reflect.Map:
			if fv.Len() == 0 {
				continue
			}
		}
		val := fmt.Sprint(fv.Interface())
		if t, ok := fv.Interface().(time.Time); ok {
			val = formatTime(&t)
		}
		if fv.Kind() == reflect.String && strings.HasPrefix(val, "P") {
			if d, err := isoduration.Parse(val); err == nil && d < isoduration.Max {
				val += " (" + d.String() + ")"
			}
		}
		row(w, f.Name, val)
	}
}
