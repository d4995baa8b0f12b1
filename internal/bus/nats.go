package bus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// NATSConfig is a JetStream stream of events and the loader's durable consumer on it.
type NATSConfig struct {
	URL       string // nats://host:4222, tls://..., comma-separated for a cluster
	CredsFile string // a .creds file (JWT + NKey), for NGS/Synadia Cloud or operator mode
	Token     string // or a plain token
	CAFile    string // extra root CAs for tls://
	// InProcess connects to an embedded server without a socket (URL is then ignored).
	InProcess nats.InProcessConnProvider

	Stream   string // stream name, e.g. COHORT_EVENTS
	Subject  string // subject the API publishes to, e.g. cohort.events
	Consumer string // the loader's durable pull consumer, e.g. cohort-loader

	// Manage creates or updates the stream and consumer to this config (the embedded bus, and
	// operators who let Cohort own them); otherwise EnsureTopology only creates what is missing.
	Manage bool
	// Stream limits: messages older than MaxAge or beyond MaxBytes are refused at publish time
	// (discard new), so the API answers 503 instead of the stream dropping accepted events.
	MaxAge   time.Duration
	MaxBytes int64
	Replicas int
	// AckWait is how long a delivered message may stay unacked before the server redelivers it;
	// the receiver marks what it still holds as in progress, so only a dead receiver's messages
	// wait this long.
	AckWait time.Duration
	// MaxAckPending bounds unacked messages across every receiver of the consumer.
	MaxAckPending int
	// ClientName names the connection in the server's monitoring.
	ClientName string
}

func (c *NATSConfig) defaults() {
	if c.Stream == "" {
		c.Stream = "COHORT_EVENTS"
	}
	if c.Subject == "" {
		c.Subject = "cohort.events"
	}
	if c.Consumer == "" {
		c.Consumer = "cohort-loader"
	}
	if c.MaxAge <= 0 {
		c.MaxAge = 7 * 24 * time.Hour
	}
	if c.MaxBytes <= 0 {
		c.MaxBytes = 10 << 30
	}
	if c.Replicas <= 0 {
		c.Replicas = 1
	}
	if c.AckWait <= 0 {
		c.AckWait = 30 * time.Second
	}
	if c.MaxAckPending <= 0 {
		c.MaxAckPending = 10_000
	}
	if c.ClientName == "" {
		c.ClientName = "cohort"
	}
}

// natsPullBytes is how much a receiver buffers ahead of its handler; above any max_payload.
const natsPullBytes = 64 << 20

// natsHeaderRoom is what a message's headers may take besides its data.
const natsHeaderRoom = 1 << 10

// NATS is a JetStream connection: a Sender on the stream's subject and a Receiver on the durable
// consumer.
type NATS struct {
	cfg NATSConfig
	nc  *nats.Conn
	js  jetstream.JetStream
	log *slog.Logger
}

// OpenNATS connects; EnsureTopology then sets up the stream and consumer.
func OpenNATS(ctx context.Context, cfg NATSConfig, logger *slog.Logger) (*NATS, error) {
	cfg.defaults()
	if cfg.URL == "" && cfg.InProcess == nil {
		return nil, errors.New("nats: a URL is required")
	}
	opts := []nats.Option{
		nats.Name(cfg.ClientName),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(time.Second),
		nats.Timeout(10 * time.Second),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				logger.Warn("nats disconnected", "error", err)
			}
		}),
		nats.ReconnectHandler(func(*nats.Conn) { logger.Info("nats reconnected") }),
	}
	if cfg.CredsFile != "" {
		opts = append(opts, nats.UserCredentials(cfg.CredsFile))
	}
	if cfg.Token != "" {
		opts = append(opts, nats.Token(cfg.Token))
	}
	if cfg.CAFile != "" {
		opts = append(opts, nats.RootCAs(cfg.CAFile))
	}
	if cfg.InProcess != nil {
		opts = append(opts, nats.InProcessServer(cfg.InProcess))
	}
	nc, err := nats.Connect(cfg.URL, opts...)
	if err != nil {
		return nil, fmt.Errorf("connect to nats: %w", err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("nats jetstream: %w", err)
	}
	return &NATS{cfg: cfg, nc: nc, js: js, log: logger}, nil
}

// Config is the configuration with its defaults filled in.
func (n *NATS) Config() NATSConfig { return n.cfg }

func (n *NATS) streamConfig() jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:        n.cfg.Stream,
		Description: "Cohort: accepted events on their way to the warehouse",
		Subjects:    []string{n.cfg.Subject},
		// A message leaves the stream once the loader has acked it.
		Retention: jetstream.WorkQueuePolicy,
		MaxAge:    n.cfg.MaxAge,
		MaxBytes:  n.cfg.MaxBytes,
		// A full stream refuses new messages (the API answers 503) rather than drop accepted ones.
		Discard:  jetstream.DiscardNew,
		Storage:  jetstream.FileStorage,
		Replicas: n.cfg.Replicas,
	}
}

func (n *NATS) consumerConfig() jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{
		Durable:       n.cfg.Consumer,
		Description:   "Cohort: the event loader",
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       n.cfg.AckWait,
		MaxDeliver:    -1, // the loader dead-letters a message that keeps failing
		MaxAckPending: n.cfg.MaxAckPending,
		FilterSubject: n.cfg.Subject,
	}
}

// EnsureTopology creates the stream and the loader's consumer if they are missing, or with
// Manage brings them to this config.
func (n *NATS) EnsureTopology(ctx context.Context) error {
	if n.cfg.Manage {
		if _, err := n.js.CreateOrUpdateStream(ctx, n.streamConfig()); err != nil {
			return fmt.Errorf("nats stream %s: %w", n.cfg.Stream, err)
		}
		if _, err := n.js.CreateOrUpdateConsumer(ctx, n.cfg.Stream, n.consumerConfig()); err != nil {
			return fmt.Errorf("nats consumer %s: %w", n.cfg.Consumer, err)
		}
		return nil
	}
	if _, err := n.js.Stream(ctx, n.cfg.Stream); errors.Is(err, jetstream.ErrStreamNotFound) {
		if _, err := n.js.CreateStream(ctx, n.streamConfig()); err != nil && !errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			return fmt.Errorf("create nats stream %s: %w", n.cfg.Stream, err)
		}
	} else if err != nil {
		return fmt.Errorf("nats stream %s: %w", n.cfg.Stream, err)
	}
	if _, err := n.js.Consumer(ctx, n.cfg.Stream, n.cfg.Consumer); errors.Is(err, jetstream.ErrConsumerNotFound) {
		if _, err := n.js.CreateConsumer(ctx, n.cfg.Stream, n.consumerConfig()); err != nil {
			return fmt.Errorf("create nats consumer %s: %w", n.cfg.Consumer, err)
		}
	} else if err != nil {
		return fmt.Errorf("nats consumer %s: %w", n.cfg.Consumer, err)
	}
	return nil
}

// Send publishes to the stream and returns once JetStream has stored the message.
func (n *NATS) Send(ctx context.Context, data []byte, attrs map[string]string) error {
	msg := &nats.Msg{Subject: n.cfg.Subject, Data: data, Header: make(nats.Header, len(attrs))}
	for k, v := range attrs {
		msg.Header[k] = []string{v}
	}
	ctx, span := n.startPublish(ctx, msg)
	if _, err := n.js.PublishMsg(ctx, msg, jetstream.WithExpectStream(n.cfg.Stream)); err != nil {
		err = fmt.Errorf("publish to nats stream %s: %w", n.cfg.Stream, err)
		endSpan(span, err)
		return err
	}
	endSpan(span, nil)
	return nil
}

// Kind names the bus in metrics.
func (n *NATS) Kind() string { return "nats" }

// MaxMessageBytes is the server's max_payload less room for headers.
func (n *NATS) MaxMessageBytes() int { return int(n.nc.MaxPayload()) - natsHeaderRoom }

// Check reports whether the stream answers (health checks).
func (n *NATS) Check(ctx context.Context) error {
	if _, err := n.js.Stream(ctx, n.cfg.Stream); err != nil {
		return fmt.Errorf("nats stream %s: %w", n.cfg.Stream, err)
	}
	return nil
}

// Receive pulls from the durable consumer until ctx ends, holding at most what s allows. At the
// end, messages the client had buffered but not handed out are nacked so that they are
// redelivered at once (to another receiver, or on the next start); what the handler holds is
// the handler's to ack or nack, also after Receive returned, while the connection is open.
func (n *NATS) Receive(ctx context.Context, s ReceiveSettings, h Handler) error {
	cons, err := n.js.Consumer(ctx, n.cfg.Stream, n.cfg.Consumer)
	if err != nil {
		return fmt.Errorf("nats consumer %s: %w", n.cfg.Consumer, err)
	}
	// The client buffers up to natsPullBytes of messages ahead of the handler, enough for the
	// loader's batches to fill between two pulls (a small buffer left the loader flushing
	// half-empty batches on its timer).
	it, err := cons.Messages(jetstream.PullMaxBytes(natsPullBytes), jetstream.WithMessagesErrOnMissingHeartbeat(false))
	if err != nil {
		return fmt.Errorf("nats consume %s: %w", n.cfg.Consumer, err)
	}
	w := newWindow(s.MaxOutstandingMessages, s.MaxOutstandingBytes)
	held := &heldSet{m: map[*Message]heldMsg{}}
	stop := make(chan struct{})
	stopNow := sync.OnceFunc(func() {
		close(stop)
		w.wake()
	})
	defer stopNow()
	go func() {
		select {
		case <-ctx.Done():
			stopNow()
		case <-stop:
		}
	}()
	go held.keepAlive(n.cfg.AckWait/3, stop, n.nc.IsClosed, n.log)

	var recvErr error
	for w.wait(stop) {
		jm, err := it.Next(jetstream.NextContext(ctx))
		if err != nil {
			if ctx.Err() == nil {
				recvErr = fmt.Errorf("nats consume %s: %w", n.cfg.Consumer, err)
			}
			break
		}
		n.deliver(jm, w, held, h)
	}
	it.Drain()
	for {
		jm, err := it.Next(jetstream.NextMaxWait(time.Second))
		if err != nil {
			break
		}
		_ = jm.Nak()
	}
	return recvErr
}

func (n *NATS) deliver(jm jetstream.Msg, w *window, held *heldSet, h Handler) {
	m := &Message{Data: jm.Data()}
	if meta, err := jm.Metadata(); err == nil {
		m.ID = strconv.FormatUint(meta.Sequence.Stream, 10)
		m.PublishTime, m.Deliveries = meta.Timestamp, int(meta.NumDelivered)
	}
	n.startDelivery(m, jm.Headers())
	id := m.ID
	size := len(jm.Data())
	w.add(size)
	m.ack = func() {
		if err := jm.Ack(); err != nil {
			n.log.Warn("nats ack; the message will be redelivered", "message_id", id, "error", err)
		}
	}
	m.nack = func() {
		if err := jm.Nak(); err != nil {
			n.log.Warn("nats nak; the message will be redelivered after the ack wait", "message_id", id, "error", err)
		}
	}
	m.settle = func() {
		held.remove(m)
		w.release(size)
	}
	held.add(m, jm)
	h(m)
}

// heldSet is what the handler holds; keepAlive tells the server those messages are still being
// worked on, so a batch that takes longer than AckWait is not redelivered meanwhile.
type heldSet struct {
	mu sync.Mutex
	m  map[*Message]heldMsg
}

type heldMsg struct {
	jm   jetstream.Msg
	seen time.Time
}

func (s *heldSet) add(m *Message, jm jetstream.Msg) {
	s.mu.Lock()
	s.m[m] = heldMsg{jm: jm, seen: time.Now()}
	s.mu.Unlock()
}

func (s *heldSet) remove(m *Message) {
	s.mu.Lock()
	delete(s.m, m)
	s.mu.Unlock()
}

// keepAlive marks held messages in progress every interval until stop is closed and nothing is
// held any more (the handler may still be storing what it took before stop) or the connection
// is closed.
func (s *heldSet) keepAlive(interval time.Duration, stop <-chan struct{}, closed func() bool, log *slog.Logger) {
	if interval <= 0 {
		interval = time.Second
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	stopped := false
	for range t.C {
		if !stopped {
			select {
			case <-stop:
				stopped = true
			default:
			}
		}
		now := time.Now()
		var due []jetstream.Msg
		s.mu.Lock()
		for _, h := range s.m {
			if now.Sub(h.seen) >= interval {
				due = append(due, h.jm)
			}
		}
		left := len(s.m)
		s.mu.Unlock()
		for _, jm := range due {
			if err := jm.InProgress(); err != nil {
				log.Debug("nats in-progress", "error", err)
			}
		}
		if stopped && (left == 0 || closed()) {
			return
		}
	}
}

// Purge drops every message of the stream (benchmarks that publish with nothing consuming).
func (n *NATS) Purge(ctx context.Context) error {
	s, err := n.js.Stream(ctx, n.cfg.Stream)
	if err != nil {
		return fmt.Errorf("nats stream %s: %w", n.cfg.Stream, err)
	}
	return s.Purge(ctx)
}

// Close flushes what the connection holds (acks above all) and closes it.
func (n *NATS) Close() error {
	if err := n.nc.FlushTimeout(5 * time.Second); err != nil && !n.nc.IsClosed() {
		n.log.Warn("nats flush at close", "error", err)
	}
	n.nc.Close()
	return nil
}
