"""A corpus of real-world-style JSON schemas, each with one valid instance (the text a model
would write), for bench/grammar_bench.py. Deterministic: the same seed gives the same corpus.

The schemas are assembled from the building blocks API and extraction schemas use (people,
addresses, orders, products, events, configs, tool arguments): nested objects, optional
properties, enums, string formats and patterns, length limits, arrays with item bounds, numeric
bounds, anyOf / nullable fields, $defs with $ref (recursive trees too), and a few keywords that
some engines cannot enforce (uniqueItems, multipleOf, not), as real schemas have them.
"""
import json
import random

FIRST = ["Ana", "Bruno", "Chen", "Dana", "Elif", "Farid", "Grace", "Hiro", "Ines", "Jonas", "Kemal", "Lena"]
LAST = ["Silva", "Okafor", "Nguyen", "Schmidt", "Rossi", "Kowalski", "Haddad", "Tanaka", "Moreau", "Jensen"]
WORDS = ["quarterly", "report", "blue", "widget", "delivery", "urgent", "river", "summit", "coffee", "ledger",
         "orbit", "garden", "signal", "harbor", "atlas", "maple", "copper", "vector", "meadow", "pixel"]
CITIES = ["Lisbon", "Nairobi", "Osaka", "Toronto", "Krakow", "Valparaiso", "Tbilisi", "Perth"]


class Gen:
    def __init__(self, seed):
        self.r = random.Random(seed)
        self.defs = {}

    def words(self, lo, hi):
        return " ".join(self.r.choice(WORDS) for _ in range(self.r.randint(lo, hi)))

    # Each field returns (schema, instance).
    def f_name(self):
        return {"type": "string", "description": "Full name"}, f"{self.r.choice(FIRST)} {self.r.choice(LAST)}"

    def f_email(self):
        n = self.r.choice(FIRST).lower()
        return {"type": "string", "format": "email"}, f"{n}.{self.r.choice(LAST).lower()}@example.com"

    def f_age(self):
        return {"type": "integer", "minimum": 0, "maximum": 130}, self.r.randint(18, 90)

    def f_price(self):
        return {"type": "number", "minimum": 0}, round(self.r.uniform(1, 500), 2)

    def f_score(self):
        return {"type": "number", "minimum": 0, "maximum": 1}, round(self.r.random(), 3)

    def f_count(self):
        return {"type": "integer"}, self.r.randint(0, 10000)

    def f_date(self):
        return {"type": "string", "format": "date"}, f"20{self.r.randint(10, 29)}-{self.r.randint(1, 12):02d}-{self.r.randint(1, 28):02d}"

    def f_datetime(self):
        return ({"type": "string", "format": "date-time"},
                f"2025-{self.r.randint(1, 12):02d}-{self.r.randint(1, 28):02d}T{self.r.randint(0, 23):02d}:{self.r.randint(0, 59):02d}:00Z")

    def f_uuid(self):
        h = "".join(self.r.choice("0123456789abcdef") for _ in range(32))
        return {"type": "string", "format": "uuid"}, f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"

    def f_status(self):
        opts = self.r.choice([["pending", "shipped", "delivered", "cancelled"], ["active", "inactive"],
                              ["low", "medium", "high", "critical"], ["draft", "published", "archived"]])
        return {"type": "string", "enum": opts}, self.r.choice(opts)

    def f_flag(self):
        return {"type": "boolean"}, self.r.random() < 0.5

    def f_text(self):
        return {"type": "string"}, self.words(3, 12).capitalize() + "."

    def f_title(self):
        return {"type": "string", "minLength": 1, "maxLength": 80}, self.words(2, 5).title()

    def f_code(self):
        return {"type": "string", "pattern": "^[A-Z]{3}-[0-9]{4}$"}, f"{''.join(self.r.choice('ABCDEFGHJK') for _ in range(3))}-{self.r.randint(1000, 9999)}"

    def f_phone(self):
        return {"type": "string", "pattern": r"^\+?[0-9]{7,15}$"}, "+" + "".join(str(self.r.randint(0, 9)) for _ in range(11))

    def f_url(self):
        return {"type": "string", "format": "uri"}, f"https://{self.r.choice(WORDS)}.example.org/{self.r.choice(WORDS)}"

    def f_tags(self):
        n = self.r.randint(1, 4)
        return ({"type": "array", "items": {"type": "string"}, "maxItems": 8},
                [self.r.choice(WORDS) for _ in range(n)])

    def f_unique_tags(self):
        return ({"type": "array", "items": {"type": "string"}, "uniqueItems": True},
                self.r.sample(WORDS, 3))

    def f_scores(self):
        return ({"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 100}, "minItems": 1, "maxItems": 5},
                [self.r.randint(0, 100) for _ in range(self.r.randint(1, 5))])

    def f_nullable_note(self):
        return {"anyOf": [{"type": "string"}, {"type": "null"}]}, None if self.r.random() < 0.5 else self.words(2, 6)

    def f_quantity(self):
        return {"type": "integer", "minimum": 1, "multipleOf": 1}, self.r.randint(1, 20)

    def f_not_empty(self):
        return {"type": "string", "not": {"const": ""}}, self.words(1, 2)

    def f_coords(self):
        return ({"type": "object", "properties": {"lat": {"type": "number", "minimum": -90, "maximum": 90},
                                                  "lon": {"type": "number", "minimum": -180, "maximum": 180}},
                 "required": ["lat", "lon"], "additionalProperties": False},
                {"lat": round(self.r.uniform(-89, 89), 4), "lon": round(self.r.uniform(-179, 179), 4)})

    def f_address(self):
        if "address" not in self.defs:
            self.defs["address"] = {"type": "object", "properties": {
                "street": {"type": "string"}, "city": {"type": "string"},
                "postal_code": {"type": "string", "pattern": "^[0-9A-Z -]{3,10}$"},
                "country": {"type": "string", "minLength": 2, "maxLength": 2}},
                "required": ["street", "city", "country"], "additionalProperties": False}
        inst = {"street": f"{self.r.randint(1, 200)} {self.r.choice(WORDS).title()} St", "city": self.r.choice(CITIES)}
        if self.r.random() < 0.6:
            inst["postal_code"] = f"{self.r.randint(10000, 99999)}"
        inst["country"] = self.r.choice(["PT", "KE", "JP", "CA", "PL"])
        return {"$ref": "#/$defs/address"}, inst

    def f_line_items(self):
        item = {"type": "object", "properties": {"sku": {"type": "string"}, "qty": {"type": "integer", "minimum": 1},
                                                 "unit_price": {"type": "number", "minimum": 0}},
                "required": ["sku", "qty", "unit_price"], "additionalProperties": False}
        inst = [{"sku": f"SKU{self.r.randint(100, 999)}", "qty": self.r.randint(1, 5), "unit_price": round(self.r.uniform(1, 99), 2)}
                for _ in range(self.r.randint(1, 3))]
        return {"type": "array", "items": item, "minItems": 1}, inst

    def f_tree(self):
        self.defs["node"] = {"type": "object", "properties": {"label": {"type": "string"},
                                                               "children": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
                             "required": ["label"], "additionalProperties": False}
        inst = {"label": "root", "children": [{"label": self.r.choice(WORDS)}, {"label": "b", "children": [{"label": "c"}]}]}
        return {"$ref": "#/$defs/node"}, inst

    def f_metadata(self):
        return ({"type": "object", "additionalProperties": {"type": "string"}},
                {self.r.choice(WORDS): self.r.choice(WORDS) for _ in range(self.r.randint(0, 3))})

    def f_contact(self):
        a, ai = self.f_email()
        b, bi = self.f_phone()
        if self.r.random() < 0.5:
            return {"oneOf": [{"type": "object", "properties": {"email": a}, "required": ["email"], "additionalProperties": False},
                              {"type": "object", "properties": {"phone": b}, "required": ["phone"], "additionalProperties": False}]}, {"email": ai}
        return {"oneOf": [{"type": "object", "properties": {"email": a}, "required": ["email"], "additionalProperties": False},
                          {"type": "object", "properties": {"phone": b}, "required": ["phone"], "additionalProperties": False}]}, {"phone": bi}

    FIELDS = {
        "person": [("name", "f_name"), ("email", "f_email"), ("age", "f_age"), ("phone", "f_phone"), ("address", "f_address"),
                   ("tags", "f_tags"), ("active", "f_flag"), ("joined", "f_date"), ("id", "f_uuid"), ("notes", "f_nullable_note"),
                   ("contact", "f_contact"), ("website", "f_url")],
        "order": [("order_id", "f_code"), ("status", "f_status"), ("items", "f_line_items"), ("total", "f_price"),
                  ("created_at", "f_datetime"), ("shipping", "f_address"), ("paid", "f_flag"), ("customer", "f_name"),
                  ("coupon", "f_nullable_note"), ("quantity", "f_quantity")],
        "product": [("title", "f_title"), ("price", "f_price"), ("sku", "f_code"), ("description", "f_text"),
                    ("tags", "f_tags"), ("rating", "f_score"), ("stock", "f_count"), ("category", "f_status"),
                    ("attributes", "f_metadata"), ("labels", "f_unique_tags")],
        "event": [("title", "f_title"), ("starts", "f_datetime"), ("location", "f_coords"), ("organizer", "f_name"),
                  ("attendees", "f_count"), ("priority", "f_status"), ("id", "f_uuid"), ("summary", "f_text"),
                  ("online", "f_flag"), ("link", "f_url")],
        "extraction": [("entity", "f_name"), ("sentiment", "f_status"), ("confidence", "f_score"), ("summary", "f_text"),
                       ("keywords", "f_tags"), ("scores", "f_scores"), ("date", "f_date"), ("topic", "f_title"),
                       ("outline", "f_tree"), ("label", "f_not_empty")],
        "config": [("name", "f_title"), ("enabled", "f_flag"), ("retries", "f_count"), ("timeout_ms", "f_count"),
                   ("mode", "f_status"), ("endpoint", "f_url"), ("threshold", "f_score"), ("labels", "f_metadata"),
                   ("owner", "f_email")],
    }

    def schema(self, domain, depth=0):
        fields = self.FIELDS[domain]
        chosen = self.r.sample(fields, self.r.randint(3, min(8, len(fields))))
        props, inst, required = {}, {}, []
        for key, fn in chosen:
            s, v = getattr(self, fn)()
            props[key] = s
            req = self.r.random() < 0.7
            if req:
                required.append(key)
            if req or self.r.random() < 0.5:
                inst[key] = v
        if depth == 0 and self.r.random() < 0.25:
            sub_domain = self.r.choice(list(self.FIELDS))
            s, v = self.schema(sub_domain, depth + 1)
            props["related"] = s
            required.append("related")
            inst["related"] = v
        schema = {"type": "object", "properties": props, "required": required, "additionalProperties": False}
        # The instance lists properties in schema order (as a model following the schema would).
        inst = {k: inst[k] for k in props if k in inst}
        return schema, inst


def corpus(n=120, seed=2026):
    out = []
    for i in range(n):
        g = Gen(seed * 1000 + i)
        domain = list(Gen.FIELDS)[i % len(Gen.FIELDS)]
        schema, inst = g.schema(domain)
        if g.defs:
            schema["$defs"] = g.defs
        if i % 10 == 9:  # some schemas arrive as arrays of records
            schema = {"type": "array", "items": schema, "minItems": 1, "maxItems": 3, **({"$defs": schema.pop("$defs")} if "$defs" in schema else {})}
            inst = [inst]
        style = i % 3  # how the model writes it: compact, spaced, pretty-printed
        text = json.dumps(inst, separators=(",", ":")) if style == 0 else json.dumps(inst) if style == 1 else json.dumps(inst, indent=2)
        out.append({"id": f"{domain}-{i:03d}", "schema": schema, "text": text})
    return out


if __name__ == "__main__":
    for c in corpus():
        print(json.dumps(c))
