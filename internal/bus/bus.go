// Package bus is the event bus between the API, which publishes accepted events, and the loader,
// which stores them. Two adapters share one shape:
//
//   - Google Cloud Pub/Sub (PubSub), the production default on Google Cloud, tested against
//     pstest, the official in-process Pub/Sub server, through the same client library;
//   - NATS JetStream (NATS), for production off Google Cloud and, embedded in the process with
//     file storage (EmbeddedNATS), the durable bus of `cohort dev`.
//
// Both publish a message only once the server has stored it, deliver at least once, redeliver
// what is not acked, and bound what one receiver holds unacked.
package bus

import (
	"context"
	"sync"
	"time"
)

// Message is a received message. Ack or Nack it exactly once; later calls do nothing.
type Message struct {
	// ID is stable across redeliveries of the same message.
	ID   string
	Data []byte
	// PublishTime is when the bus stored the message (zero when the bus does not say): the
	// loader's lag is measured from it.
	PublishTime time.Time
	// Deliveries is how often the bus has delivered the message, this time included (0 when the
	// bus does not count: Pub/Sub counts only on subscriptions with a dead-letter policy).
	Deliveries int

	once   sync.Once
	ack    func()
	nack   func()
	settle func() // releases what the receiver's flow control counted for the message
	// ctx carries the delivery's span, a child of the publisher's (see Context).
	ctx context.Context
	// finish ends the delivery's span with the outcome, "ack" or "nack"; nil when the bus's
	// client ends it itself (Pub/Sub).
	finish func(outcome string)
}

// Ack tells the bus the message is handled: it is not delivered again.
func (m *Message) Ack() { m.once.Do(func() { m.ack(); m.done("ack") }) }

// Nack hands the message back for redelivery.
func (m *Message) Nack() { m.once.Do(func() { m.nack(); m.done("nack") }) }

func (m *Message) done(outcome string) {
	if m.finish != nil {
		m.finish(outcome)
	}
	if m.settle != nil {
		m.settle()
	}
}

// Context carries the trace of the message: the span of its delivery, whose parent is the
// span that published it (the API request that accepted the events), so work done for the
// message joins the publisher's trace. It carries no deadline or cancellation: combine it with
// the receiver's own context, e.g. trace.ContextWithSpan(ctx, trace.SpanFromContext(m.Context())).
// Background when the bus carried no trace context.
func (m *Message) Context() context.Context {
	if m.ctx == nil {
		return context.Background()
	}
	return m.ctx
}

// ReceiveSettings bound what a receiver holds: messages handed to the handler and not yet acked or
// nacked count against both limits, and delivery waits while either is reached.
type ReceiveSettings struct {
	MaxOutstandingMessages int
	MaxOutstandingBytes    int
	// Streams is how many Pub/Sub StreamingPull streams receive (NATS pulls on one subscription).
	Streams int
}

// Handler takes a received message. Receive calls it from one or more goroutines.
type Handler func(*Message)

// Sender publishes messages and returns once the bus has stored them.
type Sender interface {
	// Send publishes data with its attributes and waits for the server's acknowledgement.
	Send(ctx context.Context, data []byte, attrs map[string]string) error
	// MaxMessageBytes is the largest message the bus takes.
	MaxMessageBytes() int
	// Check reports whether the bus answers (health).
	Check(ctx context.Context) error
}

// Receiver delivers messages to a handler until ctx ends.
type Receiver interface {
	Receive(ctx context.Context, s ReceiveSettings, h Handler) error
}

// window counts what a receiver holds and makes delivery wait while a limit is reached.
type window struct {
	mu           sync.Mutex
	cond         *sync.Cond
	msgs, bytes  int
	maxMsgs, max int
}

func newWindow(maxMsgs, maxBytes int) *window {
	w := &window{maxMsgs: maxMsgs, max: maxBytes}
	w.cond = sync.NewCond(&w.mu)
	return w
}

// wait blocks until there is room for one more message or stop is closed; it reports which.
func (w *window) wait(stop <-chan struct{}) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for w.full() {
		select {
		case <-stop:
			return false
		default:
		}
		w.cond.Wait()
	}
	return true
}

func (w *window) full() bool {
	return (w.maxMsgs > 0 && w.msgs >= w.maxMsgs) || (w.max > 0 && w.bytes >= w.max)
}

func (w *window) add(n int) {
	w.mu.Lock()
	w.msgs++
	w.bytes += n
	w.mu.Unlock()
}

func (w *window) release(n int) {
	w.mu.Lock()
	w.msgs--
	w.bytes -= n
	w.mu.Unlock()
	w.cond.Broadcast()
}

// wake lets waiters see that stop was closed. It takes the lock so that a waiter between its
// look at stop and its Wait cannot miss the broadcast.
func (w *window) wake() {
	w.mu.Lock()
	w.mu.Unlock()
	w.cond.Broadcast()
}
