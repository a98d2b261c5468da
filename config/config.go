// Package config reads Busbar's configuration file. The file is a superset of
// the official Service Bus emulator's Config.json: an emulator file is
// accepted unchanged (comments included), and Busbar's own settings live in
// an optional top-level "Busbar" object.
//
// The package only parses and validates; it does not touch the broker. The
// server applies the declared entities at start.
package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/busbar-io/busbar/isoduration"
)

// File is the whole configuration file.
type File struct {
	// UserConfig is the emulator's section: the namespace and its entities.
	UserConfig *UserConfig `json:"UserConfig,omitempty"`
	// Busbar holds settings the emulator does not have.
	Busbar *Busbar `json:"Busbar,omitempty"`
}

// UserConfig is the emulator's "UserConfig" object.
type UserConfig struct {
	Namespaces []Namespace `json:"Namespaces"`
	Logging    *Logging    `json:"Logging,omitempty"`
}

// Logging is the emulator's logging setting; Busbar accepts it and logs to the console.
type Logging struct {
	Type string `json:"Type"`
}

// Namespace declares the namespace's entities.
type Namespace struct {
	Name   string  `json:"Name"`
	Queues []Queue `json:"Queues"`
	Topics []Topic `json:"Topics"`
}

// Queue declares a queue.
type Queue struct {
	Name       string          `json:"Name"`
	Properties QueueProperties `json:"Properties"`
}

// QueueProperties are a queue's declared properties; nil means the default.
type QueueProperties struct {
	DeadLetteringOnMessageExpiration    *bool    `json:"DeadLetteringOnMessageExpiration,omitempty"`
	DefaultMessageTimeToLive            Duration `json:"DefaultMessageTimeToLive,omitempty"`
	DuplicateDetectionHistoryTimeWindow Duration `json:"DuplicateDetectionHistoryTimeWindow,omitempty"`
	ForwardDeadLetteredMessagesTo       string   `json:"ForwardDeadLetteredMessagesTo,omitempty"`
	ForwardTo                           string   `json:"ForwardTo,omitempty"`
	LockDuration                        Duration `json:"LockDuration,omitempty"`
	MaxDeliveryCount                    *int32   `json:"MaxDeliveryCount,omitempty"`
	RequiresDuplicateDetection          *bool    `json:"RequiresDuplicateDetection,omitempty"`
	RequiresSession                     *bool    `json:"RequiresSession,omitempty"`
	// Busbar extensions (Service Bus properties the emulator's schema lacks).
	MaxSizeInMegabytes        *int64   `json:"MaxSizeInMegabytes,omitempty"`
	MaxMessageSizeInKilobytes *int64   `json:"MaxMessageSizeInKilobytes,omitempty"`
	AutoDeleteOnIdle          Duration `json:"AutoDeleteOnIdle,omitempty"`
}

// Topic declares a topic and its subscriptions.
type Topic struct {
	Name          string          `json:"Name"`
	Properties    TopicProperties `json:"Properties"`
	Subscriptions []Subscription  `json:"Subscriptions"`
}

// TopicProperties are a topic's declared properties; nil means the default.
type TopicProperties struct {
	DefaultMessageTimeToLive            Duration `json:"DefaultMessageTimeToLive,omitempty"`
	DuplicateDetectionHistoryTimeWindow Duration `json:"DuplicateDetectionHistoryTimeWindow,omitempty"`
	RequiresDuplicateDetection          *bool    `json:"RequiresDuplicateDetection,omitempty"`
	MaxSizeInMegabytes                  *int64   `json:"MaxSizeInMegabytes,omitempty"`
	MaxMessageSizeInKilobytes           *int64   `json:"MaxMessageSizeInKilobytes,omitempty"`
	AutoDeleteOnIdle                    Duration `json:"AutoDeleteOnIdle,omitempty"`
}

// Subscription declares a subscription and its rules.
type Subscription struct {
	Name       string                 `json:"Name"`
	Properties SubscriptionProperties `json:"Properties"`
	Rules      []Rule                 `json:"Rules"`
}

// SubscriptionProperties are a subscription's declared properties.
type SubscriptionProperties struct {
	DeadLetteringOnMessageExpiration          *bool    `json:"DeadLetteringOnMessageExpiration,omitempty"`
	DeadLetteringOnFilterEvaluationExceptions *bool    `json:"DeadLetteringOnFilterEvaluationExceptions,omitempty"`
	DefaultMessageTimeToLive                  Duration `json:"DefaultMessageTimeToLive,omitempty"`
	LockDuration                              Duration `json:"LockDuration,omitempty"`
	MaxDeliveryCount                          *int32   `json:"MaxDeliveryCount,omitempty"`
	ForwardDeadLetteredMessagesTo             string   `json:"ForwardDeadLetteredMessagesTo,omitempty"`
	ForwardTo                                 string   `json:"ForwardTo,omitempty"`
	RequiresSession                           *bool    `json:"RequiresSession,omitempty"`
	AutoDeleteOnIdle                          Duration `json:"AutoDeleteOnIdle,omitempty"`
}

// Rule declares a subscription rule.
type Rule struct {
	Name       string         `json:"Name"`
	Properties RuleProperties `json:"Properties"`
}

// RuleProperties is a rule's filter and optional action.
type RuleProperties struct {
	FilterType        string             `json:"FilterType"` // "Sql" or "Correlation"
	SqlFilter         *SQLExpression     `json:"SqlFilter,omitempty"`
	CorrelationFilter *CorrelationFilter `json:"CorrelationFilter,omitempty"`
	Action            *SQLExpression     `json:"Action,omitempty"`
}

// SQLExpression holds a SQL filter or action text.
type SQLExpression struct {
	SqlExpression string `json:"SqlExpression"`
}

// CorrelationFilter is an exact-match filter on system and user properties.
type CorrelationFilter struct {
	ContentType      string         `json:"ContentType,omitempty"`
	CorrelationId    string         `json:"CorrelationId,omitempty"`
	Label            string         `json:"Label,omitempty"`
	MessageId        string         `json:"MessageId,omitempty"`
	ReplyTo          string         `json:"ReplyTo,omitempty"`
	ReplyToSessionId string         `json:"ReplyToSessionId,omitempty"`
	SessionId        string         `json:"SessionId,omitempty"`
	To               string         `json:"To,omitempty"`
	Properties       map[string]any `json:"Properties,omitempty"`
}

// Busbar holds Busbar's own settings. Every field is optional; flags and
// BUSBAR_* environment variables override them.
type Busbar struct {
	AMQPAddr    string `json:"AmqpAddr,omitempty"`    // default 127.0.0.1:5672
	AMQPSAddr   string `json:"AmqpsAddr,omitempty"`   // TLS listener, e.g. 127.0.0.1:5671; empty = off
	HTTPAddr    string `json:"HttpAddr,omitempty"`    // default 127.0.0.1:5300
	DataDir     string `json:"DataDir,omitempty"`     // default ./busbar-data
	TLSCertFile string `json:"TlsCertFile,omitempty"` // PEM certificate for the TLS listener
	TLSKeyFile  string `json:"TlsKeyFile,omitempty"`  // PEM key for the TLS listener
	// SharedAccessPolicies are the SAS rules; namespace-level unless Entity is set.
	SharedAccessPolicies []Policy `json:"SharedAccessPolicies,omitempty"`
}

// Policy is a shared access authorization rule.
type Policy struct {
	KeyName      string   `json:"KeyName"`
	PrimaryKey   string   `json:"PrimaryKey"`
	SecondaryKey string   `json:"SecondaryKey,omitempty"`
	Rights       []string `json:"Rights"` // Manage, Send, Listen
	Entity       string   `json:"Entity,omitempty"`
}

// Duration is an ISO 8601 duration in the file ("PT1M"). The zero Duration
// is an absent property, which takes the broker's default.
type Duration struct {
	time.Duration
	// Set reports whether the file gave the property, to tell an explicit
	// "PT0S" from an absent one.
	Set bool
}

// UnmarshalJSON parses an ISO 8601 duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("want an ISO 8601 duration string such as \"PT1M\", got %s", b)
	}
	v, err := isoduration.Parse(s)
	if err != nil {
		return err
	}
	if v < 0 {
		return fmt.Errorf("duration %q is negative", s)
	}
	d.Duration, d.Set = v, true
	return nil
}

// MarshalJSON writes the duration in ISO 8601.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(isoduration.Format(d.Duration))
}

// EmulatorKey is the well-known key of the official emulator's connection
// string. It is accepted as the RootManageSharedAccessKey when the config file
// is an emulator file that declares no policies of its own.
const EmulatorKey = "SAS_KEY_VALUE"

// Load reads and validates a configuration file.
func Load(path string) (*File, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	f, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	return f, nil
}

// Parse parses and validates configuration text (JSON with comments).
func Parse(b []byte) (*File, error) {
	clean, err := stripComments(b)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(clean))
	dec.DisallowUnknownFields()
	var f File
	if err := dec.Decode(&f); err != nil {
		return nil, describeJSONError(clean, err)
	}
	if dec.More() {
		return nil, errors.New("unexpected text after the top-level object")
	}
	if err := f.validate(); err != nil {
		return nil, err
	}
	return &f, nil
}

// IsEmulatorFile reports whether the file declares entities the emulator way
// and no Busbar policies, so the emulator's well-known key applies.
func (f *File) IsEmulatorFile() bool {
	return f.UserConfig != nil && (f.Busbar == nil || len(f.Busbar.SharedAccessPolicies) == 0)
}

func (f *File) validate() error {
	if f.UserConfig != nil {
		if len(f.UserConfig.Namespaces) > 1 {
			return fmt.Errorf("UserConfig.Namespaces: one namespace expected, found %d", len(f.UserConfig.Namespaces))
		}
		for _, ns := range f.UserConfig.Namespaces {
			for _, t := range ns.Topics {
				for _, s := range t.Subscriptions {
					for _, r := range s.Rules {
						if err := r.Properties.validate(); err != nil {
							return fmt.Errorf("topic %q subscription %q rule %q: %w", t.Name, s.Name, r.Name, err)
						}
					}
				}
			}
		}
	}
	if f.Busbar != nil {
		for i, p := range f.Busbar.SharedAccessPolicies {
			if p.KeyName == "" || p.PrimaryKey == "" {
				return fmt.Errorf("Busbar.SharedAccessPolicies[%d]: KeyName and PrimaryKey are required", i)
			}
			if len(p.Rights) == 0 {
				return fmt.Errorf("Busbar.SharedAccessPolicies[%d] (%s): Rights must list Manage, Send and/or Listen", i, p.KeyName)
			}
		}
		if (f.Busbar.TLSCertFile == "") != (f.Busbar.TLSKeyFile == "") {
			return errors.New("Busbar: TlsCertFile and TlsKeyFile go together")
		}
	}
	return nil
}

func (r RuleProperties) validate() error {
	switch r.FilterType {
	case "Sql":
		if r.SqlFilter == nil {
			return errors.New(`FilterType "Sql" needs a SqlFilter`)
		}
	case "Correlation":
		if r.CorrelationFilter == nil {
			return errors.New(`FilterType "Correlation" needs a CorrelationFilter`)
		}
	default:
		return fmt.Errorf(`FilterType %q: want "Sql" or "Correlation"`, r.FilterType)
	}
	return nil
}

// describeJSONError adds the line and column to encoding/json's errors.
func describeJSONError(src []byte, err error) error {
	var off int64 = -1
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		off = syn.Offset
	case errors.As(err, &typ):
		off = typ.Offset
	}
	if off < 0 || off > int64(len(src)) {
		return err
	}
	line := 1 + bytes.Count(src[:off], []byte("\n"))
	col := off - int64(bytes.LastIndexByte(src[:off], '\n'))
	return fmt.Errorf("line %d, column %d: %w", line, col, err)
}
