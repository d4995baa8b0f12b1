package shopify

import (
	"math"
	"strings"
	"time"
)

// mapOrder maps orders/create (order_completed) and orders/paid (order_paid), plus a
// context_identified event when the order names its buyer.
func mapOrder(o map[string]any, receivedAt time.Time, eventType string) []Event {
	cust := object(o, "customer")
	mail := email(cust["email"], o["email"], o["contact_email"])
	userID := userIDOf(idOf(cust["id"]), mail)
	if userID == "" {
		return nil
	}

	// processed_at is the order's business date (back-dated for imported orders); for order_paid
	// the last update of the order is the closest Shopify gets to the moment of payment.
	var at time.Time
	if eventType == EventOrderPaid {
		at = occurredAt(o, receivedAt, "updated_at", "processed_at", "created_at")
	} else {
		at = occurredAt(o, receivedAt, "processed_at", "created_at", "updated_at")
	}

	p := map[string]any{}
	if id := idOf(o["id"]); id != "" {
		p["order_id"] = id
	}
	if n, ok := count(o["order_number"]); ok {
		p["order_number"] = n
	}
	if name, ok := text(o, "name"); ok {
		p["order_name"] = name
	}
	for _, k := range []string{"total_price", "subtotal_price", "total_tax", "total_discounts"} {
		putMoney(p, o, k)
	}
	for _, k := range []string{"currency", "financial_status", "source_name", "landing_site", "referring_site"} {
		putText(p, o, k)
	}
	lines := summarize(array(o, "line_items"))
	lines.put(p)
	p["discount_codes"] = discountCodes(array(o, "discount_codes"))

	events := []Event{{UserID: userID, EventType: eventType, OccurredAt: at, Payload: p, Suffix: eventType}}

	traits := map[string]any{}
	if mail != "" {
		traits["email"] = mail
	}
	putText(traits, cust, "first_name")
	putText(traits, cust, "last_name")
	if len(traits) > 0 { // the order carries an e-mail or a name
		if phone, ok := text(cust, "phone"); ok {
			traits["phone"] = phone
		} else if phone, ok := text(o, "phone"); ok {
			traits["phone"] = phone
		}
		events = append(events, Event{UserID: userID, EventType: EventContextIdentified, OccurredAt: at, Payload: traits, Suffix: SuffixIdentify})
	}
	return events
}

// mapCheckout maps checkouts/create to checkout_started.
func mapCheckout(c map[string]any, receivedAt time.Time) []Event {
	cust := object(c, "customer")
	userID := userIDOf(idOf(cust["id"]), email(cust["email"], c["email"]))
	if userID == "" {
		return nil
	}
	p := map[string]any{}
	putText(p, c, "token")
	if id := idOf(c["id"]); id != "" {
		p["checkout_id"] = id
	}
	if t := cartToken(c, "cart_token"); t != "" {
		p["cart_token"] = t
	}
	for _, k := range []string{"total_price", "subtotal_price", "total_tax", "total_discounts"} {
		putMoney(p, c, k)
	}
	for _, k := range []string{"currency", "abandoned_checkout_url", "source_name", "landing_site", "referring_site"} {
		putText(p, c, k)
	}
	lines := summarize(array(c, "line_items"))
	lines.put(p)
	p["discount_codes"] = discountCodes(array(c, "discount_codes"))
	at := occurredAt(c, receivedAt, "created_at", "updated_at")
	return []Event{{UserID: userID, EventType: EventCheckoutStarted, OccurredAt: at, Payload: p, Suffix: EventCheckoutStarted}}
}

// mapCustomer maps customers/create (context_identified + customer_created) and customers/update
// (context_identified).
func mapCustomer(c map[string]any, receivedAt time.Time, created bool) []Event {
	id := idOf(c["id"])
	mail := email(c["email"])
	userID := userIDOf(id, mail)
	if userID == "" {
		return nil
	}
	var at time.Time
	if created {
		at = occurredAt(c, receivedAt, "created_at", "updated_at")
	} else {
		at = occurredAt(c, receivedAt, "updated_at", "created_at")
	}

	traits := map[string]any{}
	if mail != "" {
		traits["email"] = mail
	}
	for _, k := range []string{"first_name", "last_name", "phone", "state", "currency"} {
		putText(traits, c, k)
	}
	if accepts, ok := acceptsMarketing(c); ok {
		traits["accepts_marketing"] = accepts
	}
	if state, ok := text(object(c, "email_marketing_consent"), "state"); ok {
		traits["email_marketing_consent"] = state
	}
	if tags, ok := c["tags"].(string); ok {
		// An empty string is kept as []: it is how an update says the last tag was removed.
		traits["tags"] = splitTags(tags)
	}
	if n, ok := count(c["orders_count"]); ok {
		traits["orders_count"] = n
	}
	putMoney(traits, c, "total_spent")
	if t, ok := timestamp(c, "created_at"); ok {
		traits["created_at"] = t.Format(time.RFC3339)
	}

	var events []Event
	if len(traits) > 0 {
		events = append(events, Event{UserID: userID, EventType: EventContextIdentified, OccurredAt: at, Payload: traits, Suffix: SuffixIdentify})
	}
	if created {
		p := map[string]any{}
		if id != "" {
			p["customer_id"] = id
		}
		putText(p, c, "state")
		if accepts, ok := traits["accepts_marketing"]; ok {
			p["accepts_marketing"] = accepts
		}
		if tags, ok := traits["tags"]; ok {
			p["tags"] = tags
		}
		events = append(events, Event{UserID: userID, EventType: EventCustomerCreated, OccurredAt: at, Payload: p, Suffix: EventCustomerCreated})
	}
	return events
}

// mapCart maps carts/create (cart_created) and carts/update (cart_updated). Cart webhooks carry no
// buyer, so the user is normally the pseudonymous "cart:<token>".
func mapCart(c map[string]any, receivedAt time.Time, eventType string) []Event {
	cust := object(c, "customer")
	token := cartToken(c, "token")
	if token == "" {
		token = cartToken(c, "id")
	}
	userID := userIDOf(firstID(cust["id"], c["customer_id"]), email(cust["email"], c["email"]))
	if userID == "" && token != "" {
		userID = "cart:" + token
	}
	if userID == "" {
		return nil
	}
	p := map[string]any{}
	if token != "" {
		p["token"] = token
	}
	lines := summarize(array(c, "line_items"))
	lines.put(p)
	if lines.totalOK {
		p["total"] = lines.total
	}
	if cur, ok := text(c, "currency"); ok {
		p["currency"] = cur
	} else if lines.currency != "" {
		p["currency"] = lines.currency
	}
	var at time.Time
	if eventType == EventCartCreated {
		at = occurredAt(c, receivedAt, "created_at", "updated_at")
	} else {
		at = occurredAt(c, receivedAt, "updated_at", "created_at")
	}
	return []Event{{UserID: userID, EventType: eventType, OccurredAt: at, Payload: p, Suffix: eventType}}
}

// userIDOf picks the Shopify customer id, else the e-mail.
func userIDOf(customerID, mail string) string {
	if customerID != "" {
		return customerID
	}
	return mail
}

func firstID(vs ...any) string {
	for _, v := range vs {
		if id := idOf(v); id != "" {
			return id
		}
	}
	return ""
}

// cartToken reads a cart token. Storefront cart ids can carry a secret "?key=..." part; it is cut
// off so it never becomes part of a user id or a payload.
func cartToken(m map[string]any, key string) string {
	t, ok := text(m, key)
	if !ok {
		return ""
	}
	if i := strings.IndexByte(t, '?'); i >= 0 {
		t = strings.TrimSpace(t[:i])
	}
	return t
}

// acceptsMarketing reads the legacy accepts_marketing flag, else derives it from
// email_marketing_consent.state (API 2022-04 and later).
func acceptsMarketing(c map[string]any) (bool, bool) {
	if b, ok := flag(c, "accepts_marketing"); ok {
		return b, true
	}
	state, ok := text(object(c, "email_marketing_consent"), "state")
	if !ok {
		return false, false
	}
	return strings.EqualFold(state, "subscribed"), true
}

// discountCodes lists the non-empty codes of an order's or checkout's discount_codes.
func discountCodes(raw []any) []any {
	out := []any{}
	for _, v := range raw {
		d, _ := v.(map[string]any)
		if code, ok := text(d, "code"); ok {
			out = append(out, code)
		}
	}
	return out
}

// lineSummary is the shared shape of order, checkout and cart line items.
type lineSummary struct {
	items    []any // [{sku, product_id, variant_id, title, quantity, price}]
	skus     []any // distinct non-empty SKUs, in order of appearance
	count    int   // sum of quantities
	total    float64
	totalOK  bool   // every line had a line total (line_price, else price x quantity)
	currency string // shop currency of the first line's price_set
}

func summarize(raw []any) lineSummary {
	s := lineSummary{items: []any{}, skus: []any{}, totalOK: true}
	seen := map[string]bool{}
	for _, v := range raw {
		li, ok := v.(map[string]any)
		if !ok {
			continue
		}
		item := map[string]any{}
		if sku, ok := text(li, "sku"); ok {
			item["sku"] = sku
			if !seen[sku] {
				seen[sku] = true
				s.skus = append(s.skus, sku)
			}
		}
		if id := idOf(li["product_id"]); id != "" {
			item["product_id"] = id
		}
		if id := idOf(li["variant_id"]); id != "" {
			item["variant_id"] = id
		}
		if title, ok := text(li, "title"); ok {
			item["title"] = title
		} else if name, ok := text(li, "name"); ok {
			item["title"] = name
		}
		qty, qtyOK := count(li["quantity"])
		if qtyOK {
			item["quantity"] = qty
			if s.count > math.MaxInt-qty {
				s.count = math.MaxInt
			} else {
				s.count += qty
			}
		}
		price, priceOK := moneyField(li, "price")
		if priceOK {
			item["price"] = price
		}
		if lp, ok := moneyField(li, "line_price"); ok {
			s.total += lp
		} else if priceOK && qtyOK {
			s.total += price * float64(qty)
		} else {
			s.totalOK = false
		}
		if s.currency == "" {
			s.currency, _ = text(object(object(li, "price_set"), "shop_money"), "currency_code")
		}
		s.items = append(s.items, item)
	}
	s.total = roundAmount(s.total)
	if math.IsInf(s.total, 0) || math.IsNaN(s.total) {
		s.totalOK = false
	}
	return s
}

// put writes line_items, skus and item_count.
func (s lineSummary) put(p map[string]any) {
	p["line_items"] = s.items
	p["skus"] = s.skus
	p["item_count"] = s.count
}
