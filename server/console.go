package server

import (
	"net/http"
	"strings"

	"github.com/busbar-io/busbar/admin"
	"github.com/busbar-io/busbar/console"
)

// withConsole serves the web console under /ui/ and everything else with
// next. A request with an api-version is the management API's, even under
// /ui/ (a queue may be called "ui").
func withConsole(c *console.Console, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if (r.URL.Path == "/ui" || strings.HasPrefix(r.URL.Path, console.Prefix)) && !r.URL.Query().Has("api-version") {
			c.ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// entityCounters reads the running totals of messages in and out of each
// entity from the Prometheus counters, for the console's rates.
func entityCounters(m *admin.Metrics) console.Counters {
	return func() (in, out map[string]float64) {
		in, out = map[string]float64{}, map[string]float64{}
		fams, err := m.Registry().Gather()
		if err != nil {
			return in, out
		}
		for _, f := range fams {
			var into map[string]float64
			switch f.GetName() {
			case "busbar_messages_in_total":
				into = in
			case "busbar_messages_out_total":
				into = out
			default:
				continue
			}
			for _, mt := range f.GetMetric() {
				for _, l := range mt.GetLabel() {
					if l.GetName() == "entity" {
						into[l.GetValue()] += mt.GetCounter().GetValue()
					}
				}
			}
		}
		return in, out
	}
}
