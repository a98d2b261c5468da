package pipelineprom_test

import (
	"fmt"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/busbar-io/busbar/pipeline"
	"github.com/busbar-io/busbar/pipeline/pipelineprom"
	"github.com/prometheus/client_golang/prometheus"
)

// Register a pipeline's collector; every counter is exported with the
// pipeline's queue and the event as labels.
func Example() {
	client, _ := azservicebus.NewClientFromConnectionString("Endpoint=sb://localhost;SharedAccessKeyName=k;SharedAccessKey=a2V5;UseDevelopmentEmulator=true", nil)
	p, _ := pipeline.New(client, "purchases", &pipeline.Options{Store: pipeline.NewBrokerStore(client, "purchases-failed")})
	p.Metrics().JobsSubmitted.Add(3)
	p.Metrics().JobsFailed.Add(1)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(pipelineprom.NewCollector(p))
	families, err := reg.Gather()
	if err != nil {
		panic(err)
	}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			if v := m.GetCounter().GetValue(); v > 0 {
				fmt.Printf("%s{", f.GetName())
				for i, l := range m.GetLabel() {
					if i > 0 {
						fmt.Print(",")
					}
					fmt.Printf("%s=%q", l.GetName(), l.GetValue())
				}
				fmt.Printf("} %v\n", v)
			}
		}
	}
	// Output:
	// busbar_pipeline_events_total{event="job_failed",queue="purchases"} 1
	// busbar_pipeline_events_total{event="job_submitted",queue="purchases"} 3
}
