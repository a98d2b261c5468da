package filter

// Message is what filters and actions read. It is implemented by the broker.
type Message interface {
	// SystemProperty returns a system property by its Service Bus name,
	// case-insensitively: MessageId, CorrelationId, SessionId,
	// ReplyToSessionId, To, ReplyTo, Label (alias Subject), ContentType,
	// TimeToLive (time.Duration), ScheduledEnqueueTimeUtc, EnqueuedTimeUtc
	// (time.Time), SequenceNumber (int64), DeliveryCount (int32), Size
	// (int64), PartitionKey, ... The boolean is false when the message has no
	// such property.
	SystemProperty(name string) (any, bool)
	// UserProperty returns an application property (case-sensitive, as
	// Service Bus). The boolean is false when the property is absent.
	UserProperty(name string) (any, bool)
}

// MutableMessage is what rule actions change.
type MutableMessage interface {
	Message
	// SetUserProperty sets (adds or replaces) an application property.
	SetUserProperty(name string, v any)
	// DeleteUserProperty removes an application property; removing an
	// absent property is not an error.
	DeleteUserProperty(name string)
	// SetSystemProperty sets one of the settable system properties and
	// returns an error for the others.
	SetSystemProperty(name string, v any) error
}

// Filter decides whether a message matches.
type Filter interface {
	// Match reports whether m satisfies the filter. A SQL filter whose
	// result is unknown (NULL) does not match. Errors are *EvalError.
	Match(m Message) (bool, error)
}

// TrueFilter matches every message (the "1=1" rule of a new subscription).
type TrueFilter struct{}

// Match always returns true.
func (TrueFilter) Match(Message) (bool, error) { return true, nil }

// String returns the SQL text equivalent of the filter.
func (TrueFilter) String() string { return "1=1" }

// FalseFilter matches no message.
type FalseFilter struct{}

// Match always returns false.
func (FalseFilter) Match(Message) (bool, error) { return false, nil }

// String returns the SQL text equivalent of the filter.
func (FalseFilter) String() string { return "1=0" }
