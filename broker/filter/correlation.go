package filter

// CorrelationFilter matches a message when every set field equals the
// message's corresponding system property and every entry of Properties
// equals the application property of the same name. Empty string fields are
// not set and match anything. A CorrelationFilter with nothing set matches
// every message, as in Service Bus.
//
// String fields compare exactly (case-sensitively). Property values compare
// with the SQL filter's equality, so an int32 application property matches
// an int64 or float64 filter value of the same number.
type CorrelationFilter struct {
	// The system properties to match; Subject is the Label system property.
	CorrelationID, MessageID, To, ReplyTo, Subject, SessionID, ReplyToSessionID, ContentType string
	// Properties are application properties that must all be present with
	// equal values.
	Properties map[string]any
}

// Match implements Filter. It never returns an error.
func (f *CorrelationFilter) Match(m Message) (bool, error) {
	checks := [...]struct{ want, name string }{
		{f.CorrelationID, "CorrelationId"},
		{f.MessageID, "MessageId"},
		{f.To, "To"},
		{f.ReplyTo, "ReplyTo"},
		{f.Subject, "Label"},
		{f.SessionID, "SessionId"},
		{f.ReplyToSessionID, "ReplyToSessionId"},
		{f.ContentType, "ContentType"},
	}
	for _, c := range checks {
		if c.want == "" {
			continue
		}
		v, ok := m.SystemProperty(c.name)
		if !ok {
			return false, nil
		}
		s, isString := v.(string)
		if !isString || s != c.want {
			return false, nil
		}
	}
	for name, want := range f.Properties {
		got, ok := m.UserProperty(name)
		if !ok {
			return false, nil
		}
		if !valuesEqual(want, got) {
			return false, nil
		}
	}
	return true, nil
}
