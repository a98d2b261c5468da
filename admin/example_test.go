package admin_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/busbar-io/busbar/admin"
	"github.com/busbar-io/busbar/broker"
	"github.com/busbar-io/busbar/sas"
	"github.com/busbar-io/busbar/store/memstore"
)

// Mount the management plane for a broker, feed its metrics, and create a
// queue with a raw ATOM request as the administration clients send it.
func ExampleNewHandler() {
	metrics := admin.NewMetrics()
	st := memstore.New()
	b, err := broker.Open(context.Background(), st, broker.Options{Observer: metrics})
	if err != nil {
		panic(err)
	}
	defer b.Close()
	metrics.CollectEntities(b)
	metrics.CollectStore(st.Stats)
	rules, err := sas.NewAuthorizer([]sas.Rule{{KeyName: "RootManageSharedAccessKey", PrimaryKey: "secret",
		Rights: sas.Manage | sas.Send | sas.Listen}})
	if err != nil {
		panic(err)
	}
	srv := httptest.NewServer(admin.NewHandler(admin.Options{Broker: b, Authorizer: rules, Metrics: metrics}))
	defer srv.Close()

	url := srv.URL + "/orders?api-version=2021-05"
	body := `<entry xmlns="http://www.w3.org/2005/Atom"><content type="application/xml">` +
		`<QueueDescription xmlns="http://schemas.microsoft.com/netservices/2010/10/servicebus/connect">` +
		`<LockDuration>PT30S</LockDuration></QueueDescription></content></entry>`
	req, _ := http.NewRequest(http.MethodPut, url, strings.NewReader(body))
	req.Header.Set("Authorization", sas.Sign(url, "RootManageSharedAccessKey", "secret", time.Now().Add(time.Hour)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		panic(err)
	}
	resp.Body.Close()
	q, _ := b.GetQueue(context.Background(), "orders")
	fmt.Println(resp.StatusCode, q.Properties.LockDuration)

	health, err := http.Get(srv.URL + "/healthz")
	if err != nil {
		panic(err)
	}
	defer health.Body.Close()
	h, _ := io.ReadAll(health.Body)
	fmt.Print(string(h))
	// Output:
	// 201 30s
	// {"status":"healthy","message":"Service is healthy."}
}
