package broker

import (
	"math"
	"time"
)

// Service Bus defaults and limits.
const (
	DefaultLockDuration              = time.Minute
	MaxLockDuration                  = 5 * time.Minute
	MinLockDuration                  = 5 * time.Second
	DefaultMaxDeliveryCount          = 10
	DefaultDuplicateDetectionWindow  = 10 * time.Minute
	MinDuplicateDetectionWindow      = 20 * time.Second
	MaxDuplicateDetectionWindow      = 7 * 24 * time.Hour
	DefaultMaxSizeInMegabytes        = 1024
	DefaultMaxMessageSizeInKilobytes = 1024
	MinAutoDeleteOnIdle              = 5 * time.Minute
	MaxForwardHops                   = 4
	DefaultRuleName                  = "$Default"
	// InfiniteTTL stands for Service Bus' "infinite" time span
	// (TimeSpan.MaxValue, 10675199 days), which a time.Duration cannot hold:
	// it is the largest Duration (about 292 years), used for
	// DefaultMessageTimeToLive and AutoDeleteOnIdle when none is set. The
	// protocol layer renders it as TimeSpan.MaxValue.
	InfiniteTTL = time.Duration(math.MaxInt64)
)

// EntityStatus is an entity's availability.
type EntityStatus string

// Entity statuses.
const (
	StatusActive          EntityStatus = "Active"
	StatusDisabled        EntityStatus = "Disabled"
	StatusSendDisabled    EntityStatus = "SendDisabled"
	StatusReceiveDisabled EntityStatus = "ReceiveDisabled"
)

func (s EntityStatus) canSend() bool    { return s == StatusActive || s == StatusReceiveDisabled }
func (s EntityStatus) canReceive() bool { return s == StatusActive || s == StatusSendDisabled }

// QueueProperties are the settable properties of a queue. Zero values mean
// the Service Bus default (LockDuration 1 min, MaxDeliveryCount 10,
// DefaultMessageTimeToLive and AutoDeleteOnIdle infinite, duplicate window
// 10 min, MaxSizeInMegabytes 1024, MaxMessageSizeInKilobytes 1024, Status
// Active); Normalize fills them in.
type QueueProperties struct {
	LockDuration                        time.Duration
	MaxSizeInMegabytes                  int64
	RequiresDuplicateDetection          bool
	DuplicateDetectionHistoryTimeWindow time.Duration
	RequiresSession                     bool
	DefaultMessageTimeToLive            time.Duration
	DeadLetteringOnMessageExpiration    bool
	MaxDeliveryCount                    int32
	Status                              EntityStatus
	ForwardTo                           string
	ForwardDeadLetteredMessagesTo       string
	AutoDeleteOnIdle                    time.Duration
	MaxMessageSizeInKilobytes           int64
	UserMetadata                        string
	EnablePartitioning                  bool
	EnableBatchedOperations             bool
	AuthorizationRules                  []AuthorizationRule
	// ForwardToURI and ForwardDeadLetteredMessagesToURI are the URIs the
	// forwarding destinations were given as ("" when given as names), kept
	// for the management API to echo them in the form given.
	ForwardToURI                     string
	ForwardDeadLetteredMessagesToURI string
}

// TopicProperties are the settable properties of a topic (zero = default,
// as QueueProperties).
type TopicProperties struct {
	MaxSizeInMegabytes                  int64
	RequiresDuplicateDetection          bool
	DuplicateDetectionHistoryTimeWindow time.Duration
	DefaultMessageTimeToLive            time.Duration
	Status                              EntityStatus
	AutoDeleteOnIdle                    time.Duration
	MaxMessageSizeInKilobytes           int64
	UserMetadata                        string
	EnablePartitioning                  bool
	EnableBatchedOperations             bool
	SupportOrdering                     bool
	AuthorizationRules                  []AuthorizationRule
}

// SubscriptionProperties are the settable properties of a subscription
// (zero = default, as QueueProperties). DefaultRule, when set at creation,
// replaces the $Default TrueFilter rule.
type SubscriptionProperties struct {
	LockDuration                              time.Duration
	RequiresSession                           bool
	DefaultMessageTimeToLive                  time.Duration
	DeadLetteringOnMessageExpiration          bool
	DeadLetteringOnFilterEvaluationExceptions bool
	MaxDeliveryCount                          int32
	Status                                    EntityStatus
	ForwardTo                                 string
	ForwardDeadLetteredMessagesTo             string
	AutoDeleteOnIdle                          time.Duration
	UserMetadata                              string
	EnableBatchedOperations                   bool
	DefaultRule                               *RuleProperties
	ForwardToURI                              string // as QueueProperties
	ForwardDeadLetteredMessagesToURI          string
}

// props is the union of every entity property, the form the broker keeps
// and persists.
type props struct {
	LockDuration        time.Duration
	MaxSizeMB           int64
	DupDetection        bool
	DupWindow           time.Duration
	RequiresSession     bool
	DefaultTTL          time.Duration
	DLOnExpiration      bool
	DLOnFilterException bool
	MaxDeliveryCount    int32
	Status              EntityStatus
	ForwardTo           string
	ForwardDLTo         string
	AutoDeleteOnIdle    time.Duration
	MaxMessageSizeKB    int64
	UserMetadata        string
	EnablePartitioning  bool
	EnableBatchedOps    bool
	SupportOrdering     bool
	AuthRules           []AuthorizationRule // queues and topics
	ForwardToURI        string
	ForwardDLToURI      string
}

func fromQueue(p QueueProperties) props {
	return props{p.LockDuration, p.MaxSizeInMegabytes, p.RequiresDuplicateDetection, p.DuplicateDetectionHistoryTimeWindow,
		p.RequiresSession, p.DefaultMessageTimeToLive, p.DeadLetteringOnMessageExpiration, false, p.MaxDeliveryCount, p.Status,
		p.ForwardTo, p.ForwardDeadLetteredMessagesTo, p.AutoDeleteOnIdle, p.MaxMessageSizeInKilobytes, p.UserMetadata,
		p.EnablePartitioning, p.EnableBatchedOperations, false, p.AuthorizationRules, p.ForwardToURI, p.ForwardDeadLetteredMessagesToURI}
}

func (p props) queue() QueueProperties {
	return QueueProperties{p.LockDuration, p.MaxSizeMB, p.DupDetection, p.DupWindow, p.RequiresSession, p.DefaultTTL,
		p.DLOnExpiration, p.MaxDeliveryCount, p.Status, p.ForwardTo, p.ForwardDLTo, p.AutoDeleteOnIdle, p.MaxMessageSizeKB,
		p.UserMetadata, p.EnablePartitioning, p.EnableBatchedOps, p.AuthRules, p.ForwardToURI, p.ForwardDLToURI}
}

func fromTopic(p TopicProperties) props {
	return props{MaxSizeMB: p.MaxSizeInMegabytes, DupDetection: p.RequiresDuplicateDetection,
		DupWindow: p.DuplicateDetectionHistoryTimeWindow, DefaultTTL: p.DefaultMessageTimeToLive, Status: p.Status,
		AutoDeleteOnIdle: p.AutoDeleteOnIdle, MaxMessageSizeKB: p.MaxMessageSizeInKilobytes, UserMetadata: p.UserMetadata,
		EnablePartitioning: p.EnablePartitioning, EnableBatchedOps: p.EnableBatchedOperations, SupportOrdering: p.SupportOrdering,
		AuthRules: p.AuthorizationRules}
}

func (p props) topic() TopicProperties {
	return TopicProperties{p.MaxSizeMB, p.DupDetection, p.DupWindow, p.DefaultTTL, p.Status, p.AutoDeleteOnIdle,
		p.MaxMessageSizeKB, p.UserMetadata, p.EnablePartitioning, p.EnableBatchedOps, p.SupportOrdering, p.AuthRules}
}

func fromSubscription(p SubscriptionProperties) props {
	return props{LockDuration: p.LockDuration, RequiresSession: p.RequiresSession, DefaultTTL: p.DefaultMessageTimeToLive,
		DLOnExpiration: p.DeadLetteringOnMessageExpiration, DLOnFilterException: p.DeadLetteringOnFilterEvaluationExceptions,
		MaxDeliveryCount: p.MaxDeliveryCount, Status: p.Status, ForwardTo: p.ForwardTo, ForwardDLTo: p.ForwardDeadLetteredMessagesTo,
		AutoDeleteOnIdle: p.AutoDeleteOnIdle, UserMetadata: p.UserMetadata, EnableBatchedOps: p.EnableBatchedOperations,
		ForwardToURI: p.ForwardToURI, ForwardDLToURI: p.ForwardDeadLetteredMessagesToURI}
}

func (p props) subscription() SubscriptionProperties {
	return SubscriptionProperties{LockDuration: p.LockDuration, RequiresSession: p.RequiresSession,
		DefaultMessageTimeToLive: p.DefaultTTL, DeadLetteringOnMessageExpiration: p.DLOnExpiration,
		DeadLetteringOnFilterEvaluationExceptions: p.DLOnFilterException, MaxDeliveryCount: p.MaxDeliveryCount,
		Status: p.Status, ForwardTo: p.ForwardTo, ForwardDeadLetteredMessagesTo: p.ForwardDLTo,
		AutoDeleteOnIdle: p.AutoDeleteOnIdle, UserMetadata: p.UserMetadata, EnableBatchedOperations: p.EnableBatchedOps,
		ForwardToURI: p.ForwardToURI, ForwardDeadLetteredMessagesToURI: p.ForwardDLToURI}
}

// normalize fills defaults and validates; maxMsgKB is the namespace ceiling.
func (p *props) normalize(k entityKind, maxMsgKB int64) error {
	if p.LockDuration == 0 {
		p.LockDuration = DefaultLockDuration
	}
	if k != kindTopic && (p.LockDuration < MinLockDuration || p.LockDuration > MaxLockDuration) {
		return errorf(ErrInvalidArgument, "LockDuration %v is outside [%v, %v]", p.LockDuration, MinLockDuration, MaxLockDuration)
	}
	if p.MaxSizeMB == 0 {
		p.MaxSizeMB = DefaultMaxSizeInMegabytes
	}
	if p.MaxSizeMB < 0 {
		return errorf(ErrInvalidArgument, "MaxSizeInMegabytes %d is negative", p.MaxSizeMB)
	}
	if p.DupWindow == 0 {
		p.DupWindow = DefaultDuplicateDetectionWindow
	}
	if p.DupWindow < MinDuplicateDetectionWindow || p.DupWindow > MaxDuplicateDetectionWindow {
		return errorf(ErrInvalidArgument, "DuplicateDetectionHistoryTimeWindow %v is outside [%v, %v]", p.DupWindow, MinDuplicateDetectionWindow, MaxDuplicateDetectionWindow)
	}
	if p.DefaultTTL == 0 || p.DefaultTTL > InfiniteTTL {
		p.DefaultTTL = InfiniteTTL
	}
	if p.DefaultTTL < time.Second {
		return errorf(ErrInvalidArgument, "DefaultMessageTimeToLive %v is shorter than 1s", p.DefaultTTL)
	}
	if p.MaxDeliveryCount == 0 {
		p.MaxDeliveryCount = DefaultMaxDeliveryCount
	}
	if p.MaxDeliveryCount < 1 {
		return errorf(ErrInvalidArgument, "MaxDeliveryCount %d is below 1", p.MaxDeliveryCount)
	}
	switch p.Status {
	case "":
		p.Status = StatusActive
	case StatusActive, StatusDisabled, StatusSendDisabled, StatusReceiveDisabled:
	default:
		return errorf(ErrInvalidArgument, "Status %q is not one of Active, Disabled, SendDisabled, ReceiveDisabled", p.Status)
	}
	if p.AutoDeleteOnIdle == 0 || p.AutoDeleteOnIdle > InfiniteTTL {
		p.AutoDeleteOnIdle = InfiniteTTL
	}
	if p.AutoDeleteOnIdle < MinAutoDeleteOnIdle {
		return errorf(ErrInvalidArgument, "AutoDeleteOnIdle %v is shorter than %v", p.AutoDeleteOnIdle, MinAutoDeleteOnIdle)
	}
	if p.MaxMessageSizeKB == 0 {
		p.MaxMessageSizeKB = min(DefaultMaxMessageSizeInKilobytes, maxMsgKB)
	}
	if p.MaxMessageSizeKB < 1 || p.MaxMessageSizeKB > maxMsgKB {
		return errorf(ErrInvalidArgument, "MaxMessageSizeInKilobytes %d is outside [1, %d]", p.MaxMessageSizeKB, maxMsgKB)
	}
	if len(p.UserMetadata) > 1024 {
		return errorf(ErrInvalidArgument, "UserMetadata is %d characters, more than 1024", len(p.UserMetadata))
	}
	if p.RequiresSession && p.ForwardTo != "" {
		return errorf(ErrInvalidArgument, "ForwardTo is not supported on a session-enabled entity")
	}
	if err := checkAuthRules(k, p.AuthRules); err != nil {
		return err
	}
	for _, f := range []string{p.ForwardTo, p.ForwardDLTo} {
		if f != "" {
			if err := validateEntityName("forwarding destination", f); err != nil {
				return err
			}
		}
	}
	return nil
}

// RuntimeInfo is the runtime state of a queue, topic or subscription. For
// a topic the counts are the sums over its subscriptions.
type RuntimeInfo struct {
	Name                           string
	CreatedAt, UpdatedAt           time.Time
	AccessedAt                     time.Time
	SizeInBytes                    int64
	TotalMessageCount              int64
	ActiveMessageCount             int64
	DeadLetterMessageCount         int64
	ScheduledMessageCount          int64
	DeferredMessageCount           int64
	TransferMessageCount           int64
	TransferDeadLetterMessageCount int64
	SubscriptionCount              int64 // topics only
}

// defaults is what an entity of kind k created without properties gets.
func (b *Broker) defaults(k entityKind) props {
	var p props
	// The zero properties take every default, which validates against any
	// ceiling Open accepts: there is no error to return.
	_ = p.normalize(k, b.opts.MaxMessageSizeInKilobytes)
	return p
}

// DefaultQueueProperties are the properties a queue created without any
// gets, on this broker (its message size ceiling included).
func (b *Broker) DefaultQueueProperties() QueueProperties { return b.defaults(kindQueue).queue() }

// DefaultTopicProperties are the properties a topic created without any
// gets, on this broker.
func (b *Broker) DefaultTopicProperties() TopicProperties { return b.defaults(kindTopic).topic() }

// DefaultSubscriptionProperties are the properties a subscription created
// without any gets, on this broker.
func (b *Broker) DefaultSubscriptionProperties() SubscriptionProperties {
	return b.defaults(kindSubscription).subscription()
}
