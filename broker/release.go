package broker

import "context"

// Release returns locked messages to their entity without counting a
// delivery: the AMQP "released" outcome, which a client sends for messages
// it received but never handed to an application (the Go SDK releases what
// arrives between ReceiveMessages calls). Service Bus does not count these
// (Azure/amqpnetlite#342), so a busy receiver's messages do not climb to
// MaxDeliveryCount. A message whose TTL passed while it was locked expires.
func (b *Broker) Release(ctx context.Context, path string, tokens ...LockToken) error {
	return b.settle(ctx, path, tokens, nil, func(q *qstate, m *msgIdx, w *work) {
		if !q.failedDeliveryMove(m, nil, false, w) {
			w.back = append(w.back, m)
		}
	})
}
