#include "kpipe/window_aggregate.h"

#include <catch2/catch.hpp>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "window_fixtures.h"

// kwindow's aggregates: each function through the engine, as kwindow(1)
// describes them, then the Aggregates layout and its snapshot form alone.

namespace kpipe {
namespace {

using namespace window_test;

TEST_CASE("window: each aggregate, and the types it writes", "[window]") {
  WindowConfig c = tumble(10, {"count", "sum:.v", "avg:.v", "min:.v", "max:.v", "distinct:.v"});
  auto one = [&](std::vector<Value> values) {
    Run run(c);
    for (const Value& v : values) run.add(1, "\"a\"", {v, v, v, v, v});
    run.flush();
    auto lines = run.take();
    REQUIRE(lines.size() == 1);
    return lines[0];
  };
  // Integers: integer sum, min, max; avg a number.
  CHECK(one({integer(3), integer(-7), integer(10)}) ==
        line(0, 10, "\"a\"",
             "\"count\":3,\"sum_v\":6,\"avg_v\":2,\"min_v\":-7,\"max_v\":10,\"distinct_v\":3"));
  CHECK(one({integer(1), integer(2)}) ==
        line(0, 10, "\"a\"",
             "\"count\":2,\"sum_v\":3,\"avg_v\":1.5,\"min_v\":1,\"max_v\":2,\"distinct_v\":2"));
  // Min and max keep the number as it was written; 1 and 1.0 are one value
  // for distinct.
  CHECK(
      one({number(1.5, "1.50"), integer(1), number(1.0, "1.0"), number(2.0, "2.0")}) ==
      line(0, 10, "\"a\"",
           "\"count\":4,\"sum_v\":5.5,\"avg_v\":1.375,\"min_v\":1,\"max_v\":2.0,\"distinct_v\":3"));
  // An integer sum beyond 64 bits is written as a float, with an exponent.
  CHECK(one({integer(INT64_MAX), integer(1)}) ==
        line(0, 10, "\"a\"",
             "\"count\":2,\"sum_v\":9.223372036854776e+18,\"avg_v\":4611686018427387904,"
             "\"min_v\":1,\"max_v\":9223372036854775807,\"distinct_v\":2"));
}

TEST_CASE("window: an integer sum is exact while it fits in 64 bits, whatever it passed through",
          "[window]") {
  Run run(tumble(10, {"sum:.v", "avg:.v"}));
  for (int64_t v : {INT64_MAX, int64_t{100}, int64_t{-100}})
    run.add(1, "\"max\"", {integer(v), integer(v)});
  for (int64_t v : {INT64_MIN, int64_t{-1}, int64_t{1}})
    run.add(1, "\"min\"", {integer(v), integer(v)});
  // Far beyond 64 bits and back.
  for (int i = 0; i < 5; ++i) run.add(1, "\"far\"", {integer(INT64_MAX), integer(INT64_MAX)});
  for (int i = 0; i < 5; ++i) run.add(1, "\"far\"", {integer(-INT64_MAX), integer(-INT64_MAX)});
  run.flush();
  CHECK(
      run.take() ==
      Lines{line(0, 10, "\"max\"", "\"sum_v\":9223372036854775807,\"avg_v\":3074457345618258432"),
            line(0, 10, "\"min\"", "\"sum_v\":-9223372036854775808,\"avg_v\":-3074457345618258432"),
            line(0, 10, "\"far\"", "\"sum_v\":0,\"avg_v\":0")});
  CHECK(run.reporter().warnings.empty());
}

TEST_CASE("window: a sum that 64 bits cannot hold is a float with an exponent, said once",
          "[window]") {
  Run run(tumble(10, {"total=sum:.v"}));
  run.add(1, "\"a\"", {integer(INT64_MIN)});
  run.add(1, "\"a\"", {integer(-1)});
  run.add(11, "\"b\"", {integer(INT64_MAX)});
  run.add(11, "\"b\"", {integer(INT64_MAX)});
  run.flush();
  // It used to stop at -9223372036854775808, as if exact.
  CHECK(run.take() == Lines{line(0, 10, "\"a\"", "\"total\":-9.223372036854776e+18"),
                            line(10, 20, "\"b\"", "\"total\":1.8446744073709552e+19")});
  CHECK(run.reporter().warnings ==
        std::vector<std::string>{
            "sum 'total' of the window at 0 with key \"a\": the sum is -9223372036854775809, "
            "beyond 64-bit integers: written as the float -9.223372036854776e+18 (said once)"});
}

TEST_CASE("window: integers beyond 64 bits are summed exactly, and never silently as floats",
          "[window]") {
  // The reader gives such an integer as its nearest double and its text.
  Value wide = number(1.2345678901234568e+29, "123456789012345678901234567890");
  Value minus_wide = number(-1.2345678901234568e+29, "-123456789012345678901234567890");
  Run run(tumble(10, {"sum:.v", "avg:.v"}));
  // Alone it was 1.2345678901234568e+29 without a word.
  run.add(1, "\"a\"", {wide, wide});
  // Exact: it comes back to 64 bits.
  run.add(1, "\"b\"", {wide, wide});
  run.add(1, "\"b\"", {integer(5), integer(5)});
  run.add(1, "\"b\"", {minus_wide, minus_wide});
  // Beyond 2^126 the sum is a float, said with the same warning's words.
  Value huge = number(1e38, "100000000000000000000000000000000000000");
  run.add(11, "\"c\"", {huge, huge});
  // A float sum stays a float sum, as before.
  run.add(11, "\"d\"", {number(1.5, "1.5"), number(1.5, "1.5")});
  run.add(11, "\"d\"", {wide, wide});
  run.flush();
  CHECK(run.take() ==
        Lines{line(0, 10, "\"a\"",
                   "\"sum_v\":1.2345678901234568e+29,\"avg_v\":1.2345678901234568e+29"),
              line(0, 10, "\"b\"", "\"sum_v\":5,\"avg_v\":1.6666666666666667"),
              line(10, 20, "\"c\"", "\"sum_v\":1e+38,\"avg_v\":1e+38"),
              line(10, 20, "\"d\"",
                   "\"sum_v\":1.2345678901234568e+29,\"avg_v\":6.172839450617284e+28")});
  CHECK(run.reporter().warnings ==
        std::vector<std::string>{"sum 'sum_v' of the window at 0 with key \"a\": the sum is "
                                 "123456789012345678901234567890, beyond 64-bit integers: written "
                                 "as the float 1.2345678901234568e+29 (said once)"});
}

TEST_CASE("window: a sum of integers beyond 2^126 is a float with an exponent, said once",
          "[window]") {
  Value huge = number(1e38, "100000000000000000000000000000000000000");
  Run run(tumble(10, {"sum:.v"}));
  run.add(1, "\"a\"", {huge});
  run.add(1, "\"a\"", {integer(1)});
  // Near the limit, within it, then past it.
  Value half = number(4e37, "40000000000000000000000000000000000000");
  run.add(1, "\"b\"", {half});
  run.add(1, "\"b\"", {half});
  run.add(1, "\"b\"", {half});
  run.flush();
  CHECK(run.take() ==
        Lines{line(0, 10, "\"a\"", "\"sum_v\":1e+38"), line(0, 10, "\"b\"", "\"sum_v\":1.2e+38")});
  CHECK(run.reporter().warnings ==
        std::vector<std::string>{"sum 'sum_v' of the window at 0 with key \"a\": the sum of "
                                 "integers is beyond 2^126, where exact sums end: written as the "
                                 "float 1e+38 (said once)"});
}

TEST_CASE("window: a sum beyond a 64-bit float is null, said once", "[window]") {
  Run run(tumble(10, {"sum:.v", "avg:.v"}));
  Value big = number(1e308, "1e308");
  run.add(1, "\"a\"", {big, big});
  run.add(1, "\"a\"", {big, big});
  run.add(2, "\"b\"", {big, big});
  run.flush();
  CHECK(run.take() == Lines{line(0, 10, "\"a\"", "\"sum_v\":null,\"avg_v\":null"),
                            line(0, 10, "\"b\"", "\"sum_v\":1e+308,\"avg_v\":1e+308")});
  CHECK(
      run.reporter().warnings ==
      std::vector<std::string>{"sum 'sum_v' of the window at 0 with key \"a\": the sum is "
                               "beyond the range of a 64-bit float: written as null (said once)"});
}

TEST_CASE("window: a number a 64-bit float cannot hold is bad input to sum and avg", "[window]") {
  Run run(tumble(10, {"sum:.v", "avg:.w", "max:.m"}));
  Record r;
  r.t = 1;
  r.key = "\"a\"";
  // What the reader hands over for 1e400: its text, and no finite value.
  Value huge = number(std::numeric_limits<double>::infinity(), "1e400");
  r.aggs = {huge, integer(1), huge};
  auto sum = run.try_add(r);
  REQUIRE_FALSE(sum.ok());
  CHECK(sum.error().status == ExitStatus::kDataError);
  CHECK(sum.error().message ==
        "field '.v' is 1e400, a number beyond the range of a 64-bit float (sum)");
  r.aggs = {integer(1), number(std::nan(""), "-1e999"), huge};
  auto avg = run.try_add(r);
  REQUIRE_FALSE(avg.ok());
  CHECK(avg.error().message ==
        "field '.w' is -1e999, a number beyond the range of a 64-bit float (avg)");
  // max writes the text as it was.
  r.aggs = {integer(1), integer(2), huge};
  run.add(r);
  run.flush();
  CHECK(run.take() == Lines{line(0, 10, "\"a\"", "\"sum_v\":1,\"avg_w\":2,\"max_m\":1e400")});

  // distinct tells them apart by their text.
  Run distinct(tumble(10, {"distinct:.v"}));
  Value inf = number(std::numeric_limits<double>::infinity(), "1e400");
  for (const Value& v : {inf, number(inf.field.number, "1e309"), inf,
                         number(-inf.field.number, "-1e400"), integer(1)})
    distinct.add(1, "\"a\"", {v});
  distinct.flush();
  CHECK(distinct.take() == Lines{line(0, 10, "\"a\"", "\"distinct_v\":4")});
}

TEST_CASE("window: sessions that merge add their sums in 128 bits", "[window]") {
  WindowConfig c = session(5, {"sum:.v"});
  c.watermark_delay = 20;
  Run run(c);
  run.add(1, "\"a\"", {integer(INT64_MAX)});
  run.add(10, "\"a\"", {integer(INT64_MAX)});
  // Bridges [1, 6) and [10, 15).
  run.add(5, "\"a\"", {integer(-INT64_MAX)});
  run.flush();
  CHECK(run.take() == Lines{line(1, 15, "\"a\"", "\"sum_v\":9223372036854775807")});
  CHECK(run.reporter().warnings.empty());
}

TEST_CASE("window: sessions that merge add integers beyond 64 bits exactly, to 2^126", "[window]") {
  WindowConfig c = session(5, {"sum:.v"});
  c.watermark_delay = 20;
  Run run(c);
  Value half = number(4e37, "40000000000000000000000000000000000000");
  Value minus_half = number(-4e37, "-40000000000000000000000000000000000000");
  run.add(1, "\"a\"", {half});
  run.add(10, "\"a\"", {half});
  run.add(5, "\"a\"", {minus_half});  // bridges [1, 6) and [10, 15)
  run.add(1, "\"b\"", {half});
  run.add(1, "\"b\"", {half});
  run.add(10, "\"b\"", {half});
  run.add(5, "\"b\"", {integer(1)});  // 1.2e38 once merged: beyond 2^126
  run.flush();
  CHECK(run.take() ==
        Lines{line(1, 15, "\"a\"", "\"sum_v\":4e+37"), line(1, 15, "\"b\"", "\"sum_v\":1.2e+38")});
  REQUIRE(run.reporter().warnings.size() == 1);
  CHECK(
      run.reporter().warnings[0].starts_with("sum 'sum_v' of the window at 1 with key \"a\": the "
                                             "sum is 40000000000000000000000000000000000000,"));
}

TEST_CASE("window: min and max of strings, and of strings mixed with numbers", "[window]") {
  WindowConfig c = tumble(10, {"min:.v", "max:.v", "distinct:.v"});
  Run run(c);
  for (const Value& v : {string("pear"), string("apple"), string("fig"), string("apple")})
    run.add(1, "\"a\"", {v, v, v});
  for (const Value& v : {string("b"), integer(100), string("a\\\"")})
    run.add(1, "\"b\"", {v, v, v});
  run.flush();
  CHECK(run.take() ==
        Lines{line(0, 10, "\"a\"", "\"min_v\":\"apple\",\"max_v\":\"pear\",\"distinct_v\":3"),
              line(0, 10, "\"b\"", "\"min_v\":100,\"max_v\":\"b\",\"distinct_v\":3")});
}

TEST_CASE("window: distinct counts values of any type exactly", "[window]") {
  WindowConfig c = tumble(10, {"distinct:.v"});
  Run run(c);
  for (const Value& v :
       {string("1"), integer(1), number(1.0, "1e0"), of_type(JsonType::kNull, "null"),
        of_type(JsonType::kBool, "true"), of_type(JsonType::kObject, "{\"a\": [1, 2]}"),
        of_type(JsonType::kObject, "{\"a\":[1,2]}"), of_type(JsonType::kArray, "[]"), string("")})
    run.add(1, "\"a\"", {v});
  run.flush();
  CHECK(run.take() == Lines{line(0, 10, "\"a\"", "\"distinct_v\":7")});
}

TEST_CASE("window: an aggregate input of the wrong type is bad input and changes nothing",
          "[window]") {
  WindowConfig c = tumble(10, {"count", "sum:.value.amount", "min:.m", "distinct:.d"});
  Run run(c);
  auto error = [&](std::vector<Value> values) {
    Record r;
    r.t = 1;
    r.key = "\"a\"";
    r.aggs = std::move(values);
    auto placed = run.try_add(r);
    REQUIRE_FALSE(placed.ok());
    CHECK(placed.error().status == ExitStatus::kDataError);
    return placed.error().message;
  };
  Value missing;
  CHECK(error({string("5"), integer(1), integer(1)}) ==
        "field '.value.amount' is a string, not a number (sum)");
  CHECK(error({missing, integer(1), integer(1)}) == "field '.value.amount' is missing");
  CHECK(error({of_type(JsonType::kNull, "null"), integer(1), integer(1)}) ==
        "field '.value.amount' is null, not a number (sum)");
  CHECK(error({integer(1), of_type(JsonType::kBool, "true"), integer(1)}) ==
        "field '.m' is a bool, not a number or a string (min)");
  CHECK(error({integer(1), of_type(JsonType::kArray, "[]"), integer(1)}) ==
        "field '.m' is an array, not a number or a string (min)");
  CHECK(error({integer(1), integer(1), missing}) == "field '.d' is missing");
  CHECK(run.engine().states() == 0);
  CHECK(run.engine().watermark() == kNoWatermark);
  run.flush();
  CHECK(run.take().empty());
}

// --- the layout, alone ------------------------------------------------------------

using window_internal::Aggregates;
using window_internal::AggState;

std::vector<AggSpec> specs(std::vector<std::string> texts) {
  std::vector<AggSpec> out;
  for (const std::string& t : texts) {
    auto spec = parse_agg_spec(t);
    REQUIRE(spec.ok());
    out.push_back(*spec);
  }
  return out;
}

// One record's inputs, one per aggregate (count's is not read).
struct Inputs {
  std::vector<Value> values;
  std::vector<const JsonField*> fields;
  Inputs(const std::vector<AggSpec>& s, std::vector<Value> v) : values(std::move(v)) {
    size_t next = 0;
    for (const AggSpec& a : s) {
      if (a.fn == AggFn::kCount) {
        fields.push_back(nullptr);
        continue;
      }
      REQUIRE(next < values.size());
      fields.push_back(&values[next++].field);
    }
  }
  const JsonField* const* data() const { return fields.data(); }
};

std::string appended(Aggregates& aggs, uint64_t count, const AggState* st) {
  std::string out;
  aggs.append(out, 0, "\"a\"", count, st);
  return out;
}

std::string saved(const Aggregates& aggs, const AggState* st) {
  std::string out;
  aggs.save(out, st);
  return out;
}

TEST_CASE("window aggregates: count keeps no state, every other aggregate one, in order",
          "[window]") {
  auto s = specs({"count", "sum:.v", "n=count", "max:.v", "distinct:.v"});
  Aggregates aggs(s, TimeFormat::kMillis, true, nullptr);
  CHECK(aggs.size() == 5);
  REQUIRE(aggs.states() == 3);

  // A pool holds entries' states end to end.
  std::vector<AggState> pool;
  for (int i = 0; i < 4; ++i) aggs.open(pool);
  CHECK(pool.size() == 12);
  CHECK(aggs.at(pool, 0) == pool.data());
  CHECK(aggs.at(pool, 2) == pool.data() + 6);
  const std::vector<AggState>& cpool = pool;
  CHECK(aggs.at(cpool, 3) == pool.data() + 9);

  // Entry 2's states, in the order of the aggregates that have one: the
  // sum, then max, then distinct; entries 1 and 3 are untouched.
  Inputs in(s, {integer(7), integer(7), integer(7)});
  aggs.add(aggs.at(pool, 2), in.data());
  aggs.add(aggs.at(pool, 2), in.data());
  CHECK(pool[6].i == 14);
  CHECK(pool[7].text() == "7");
  REQUIRE(pool[8].extra);
  CHECK(pool[8].extra->distinct.size() == 1);
  for (size_t k : {3, 4, 5, 9, 10, 11}) {
    CHECK(pool[k].i == 0);
    CHECK(pool[k].mode == 0);
    CHECK_FALSE(pool[k].extra);
  }
  CHECK(appended(aggs, 2, aggs.at(pool, 2)) ==
        ",\"count\":2,\"sum_v\":14,\"n\":2,\"max_v\":7,\"distinct_v\":1");
  CHECK(appended(aggs, 0, aggs.at(pool, 1)) ==
        ",\"count\":0,\"sum_v\":0,\"n\":0,\"max_v\":,\"distinct_v\":0");

  Aggregates counts(specs({"count", "n=count"}), TimeFormat::kMillis, true, nullptr);
  CHECK(counts.states() == 0);
  std::vector<AggState> none;
  counts.open(none);
  CHECK(none.empty());
  CHECK(appended(counts, 3, none.data()) == ",\"count\":3,\"n\":3");
  CHECK(saved(counts, none.data()) == ",null,null");
}

TEST_CASE("window aggregates: merging folds one entry's states into another's", "[window]") {
  auto s = specs({"count", "sum:.v", "min:.v", "max:.v", "distinct:.v", "avg:.v"});
  Aggregates aggs(s, TimeFormat::kMillis, true, nullptr);
  std::vector<AggState> a, b, empty;
  aggs.open(a);
  aggs.open(b);
  aggs.open(empty);
  Inputs one(s, {integer(5), integer(5), integer(5), integer(5), integer(5)});
  // min: a number below; max: a string, above every number.
  Inputs two(
      s, {integer(INT64_MAX), number(2.5, "2.5"), string("x"), string("y"), integer(INT64_MAX)});
  aggs.add(a.data(), one.data());
  aggs.add(b.data(), two.data());
  aggs.merge(a.data(), b.data());
  // The sum in 128 bits: 5 + 2^63 - 1.
  CHECK(saved(aggs, a.data()) ==
        ",null,[0,-9223372036854775804],\"n2.5\",\"sx\",[\"n5\",\"sy\"],[0,-9223372036854775804]");
  // An entry with no record merges as nothing.
  aggs.merge(a.data(), empty.data());
  CHECK(saved(aggs, a.data()) ==
        ",null,[0,-9223372036854775804],\"n2.5\",\"sx\",[\"n5\",\"sy\"],[0,-9223372036854775804]");
}

TEST_CASE("window aggregates: what save writes, load reads back into the same states", "[window]") {
  auto s = specs({"count", "sum:.v", "sum:.w", "min:.v", "max:.w", "distinct:.v", "avg:.w"});
  Aggregates aggs(s, TimeFormat::kMillis, true, nullptr);
  std::vector<AggState> st;
  aggs.open(st);
  for (auto [v, w] : {std::pair{integer(INT64_MAX), number(0.5, "0.5")},
                      std::pair{integer(3), string("b")}, std::pair{string("a"), integer(1)}}) {
    // sum:.v and avg:.w take numbers only.
    Value sv = v.field.type == JsonType::kString ? integer(0) : v;
    Value aw = w.field.type == JsonType::kString ? integer(0) : w;
    Inputs in(s, {sv, aw, v, w, v, aw});
    aggs.add(st.data(), in.data());
  }
  std::string bytes = saved(aggs, st.data());
  // An integer sum past 64 bits as its halves, one of floats as its text,
  // min and max tagged s(tring) or n(umber), distinct's values sorted.
  CHECK(bytes ==
        ",null,[0,-9223372036854775806],\"1.5\",\"n3\",\"sb\",[\"n3\",\"n9223372036854775807\","
        "\"sa\"],\"1.5\"");

  auto json = parse_json("[" + bytes.substr(1) + "]");
  REQUIRE(json.ok());
  REQUIRE(json->items.size() == s.size());
  std::vector<AggState> back;
  aggs.open(back);
  REQUIRE(aggs.load(json->items.data(), back.data()).ok());
  CHECK(saved(aggs, back.data()) == bytes);
  CHECK(appended(aggs, 3, back.data()) == appended(aggs, 3, st.data()));
}

TEST_CASE("window aggregates: load refuses values no kwindow saved", "[window]") {
  auto s = specs({"sum:.v", "min:.v", "distinct:.v"});
  Aggregates aggs(s, TimeFormat::kMillis, true, nullptr);
  auto load = [&](std::string text) {
    auto json = parse_json(text);
    REQUIRE(json.ok());
    std::vector<AggState> st;
    aggs.open(st);
    Status status = aggs.load(json->items.data(), st.data());
    return status.ok() ? std::string("ok") : status.error().message;
  };
  CHECK(load("[1,\"n1\",[]]") == "ok");
  CHECK(load("[true,\"n1\",[]]") == "bad sum");
  CHECK(load("[[1],\"n1\",[]]") == "bad sum");
  CHECK(load("[1,\"\",[]]") == "bad min");
  CHECK(load("[1,\"nx\",[]]") == "bad number");
  CHECK(load("[1,\"n1\",{}]") == "bad distinct");
  CHECK(load("[1,\"n1\",[1]]") == "bad distinct value");
}

TEST_CASE("window aggregates: check names the field and the function", "[window]") {
  auto s = specs({"count", "sum:.v", "min:.w"});
  Aggregates aggs(s, TimeFormat::kMillis, true, nullptr);
  auto check = [&](Value v, Value w) {
    Inputs in(s, {std::move(v), std::move(w)});
    Status status = aggs.check(in.data());
    return status.ok() ? std::string("ok") : status.error().message;
  };
  CHECK(check(integer(1), string("a")) == "ok");
  CHECK(check(of_type(JsonType::kMissing, ""), integer(1)) == "field '.v' is missing");
  CHECK(check(string("a"), integer(1)) == "field '.v' is a string, not a number (sum)");
  CHECK(check(integer(1), of_type(JsonType::kNull, "null")) ==
        "field '.w' is null, not a number or a string (min)");

  std::string described;
  aggs.describe(described);
  CHECK(described == " count sum:.v min:.w");
}

}  // namespace
}  // namespace kpipe
