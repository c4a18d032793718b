// ParquetRowCount / FooterRowCount: hand-encoded Thrift footers (every type skipped, long and
// short field ids and list sizes), every truncation and random bytes (an error, never a crash),
// and files written by pyarrow (when $PETAL_PYTHON has it) against pyarrow's own count.
#include "bulk/parquet_footer.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>

namespace petal::bulk {
namespace {

// A minimal Thrift compact-protocol writer for the test's footers.
struct Enc {
  std::string s;
  int16_t last = 0;
  void Varint(uint64_t v) {
    while (v >= 0x80) {
      s += static_cast<char>((v & 0x7f) | 0x80);
      v >>= 7;
    }
    s += static_cast<char>(v);
  }
  void Zigzag(int64_t v) {
    Varint((static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63));
  }
  void Field(int16_t id, uint8_t type) {
    const int delta = id - last;
    if (delta > 0 && delta <= 15) {
      s += static_cast<char>((delta << 4) | type);
    } else {
      s += static_cast<char>(type);
      Zigzag(id);
    }
    last = id;
  }
  void Binary(const std::string& b) {
    Varint(b.size());
    s += b;
  }
  void ListHeader(size_t n, uint8_t type) {
    if (n < 15) {
      s += static_cast<char>((n << 4) | type);
    } else {
      s += static_cast<char>(0xf0 | type);
      Varint(n);
    }
  }
  void Stop() { s += '\0'; }
};

// A SchemaElement-like struct with a string, an i32, a bool and a nested struct.
void SchemaElement(Enc* e, const std::string& name, bool flag) {
  const int16_t saved = e->last;
  e->last = 0;
  e->Field(1, 5);  // type: i32
  e->Zigzag(-7);
  e->Field(4, 8);  // name
  e->Binary(name);
  e->Field(5, flag ? 1 : 2);  // a bool: the value is the type
  e->Field(10, 12);           // a nested struct
  e->last = 0;
  e->Field(1, 7);  // double
  e->s.append(8, '\x11');
  e->Field(2, 3);  // byte
  e->s += '\x05';
  e->Stop();
  e->last = 10;
  e->Stop();
  e->last = saved;
}

std::string Footer(int64_t rows, size_t schema_len, bool long_ids) {
  Enc e;
  e.Field(1, 5);
  e.Zigzag(2);  // version
  e.Field(2, 9);
  e.ListHeader(schema_len, 12);
  for (size_t i = 0; i < schema_len; ++i) SchemaElement(&e, "col" + std::to_string(i), i % 2);
  if (long_ids) {  // unknown fields with explicit ids before num_rows: a map, a set, a list
    e.Field(40, 11);
    e.Varint(2);
    e.s += static_cast<char>((8 << 4) | 6);  // binary -> i64
    e.Binary("k1");
    e.Zigzag(1);
    e.Binary("k2");
    e.Zigzag(-1);
    e.Field(41, 10);
    e.ListHeader(3, 4);
    for (int i = 0; i < 3; ++i) e.Zigzag(i * 1000);
    e.Field(42, 9);
    e.ListHeader(2, 1);  // a list of bools: a byte each
    e.s += "\x01\x02";
    e.Field(43, 11);
    e.Varint(0);  // an empty map has no type byte
  }               // (then num_rows, id 3 after 43: its header takes the long form)
  e.Field(3, 6);
  e.Zigzag(rows);
  e.Field(4, 9);
  e.ListHeader(0, 12);
  e.Stop();
  return e.s;
}

TEST(ParquetFooter, HandEncodedFootersGiveTheirRowCount) {
  for (bool long_ids : {false, true}) {
    for (size_t schema : {0, 1, 14, 15, 200}) {
      for (int64_t rows : {int64_t{0}, int64_t{1}, int64_t{1234567}, int64_t{1} << 40}) {
        auto n = FooterRowCount(Footer(rows, schema, long_ids));
        ASSERT_TRUE(n.ok()) << n.status().message() << " schema " << schema;
        EXPECT_EQ(*n, rows);
      }
    }
  }
}

TEST(ParquetFooter, TruncatedAndRandomFootersAreErrors) {
  const std::string f = Footer(99, 20, true);
  // num_rows ends 3 bytes before the end (row_groups' header, its empty list, the stop byte):
  // every shorter prefix is an error, every longer one gives the count.
  for (size_t n = 0; n <= f.size(); ++n) {
    auto r = FooterRowCount(std::string_view(f.data(), n));
    if (n < f.size() - 3) {
      EXPECT_FALSE(r.ok()) << "prefix " << n;
    } else {
      ASSERT_TRUE(r.ok()) << "prefix " << n;
      EXPECT_EQ(*r, 99);
    }
  }
  std::mt19937 rng(7);
  for (int i = 0; i < 20000; ++i) {
    std::string s(rng() % 64, '\0');
    for (char& c : s) c = static_cast<char>(rng());
    (void)FooterRowCount(s);  // must return, whatever it says
  }
  std::string deep;
  for (int i = 0; i < 100000; ++i) deep += "\x1c";  // structs in structs: bounded, not a crash
  EXPECT_FALSE(FooterRowCount(deep).ok());
  EXPECT_FALSE(FooterRowCount(std::string(1, '\0')).ok());  // no num_rows
}

std::string TempPath(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("petal_pq_" + std::to_string(getpid()) + "_" + name))
      .string();
}

TEST(ParquetFooter, BadFilesAreClearErrors) {
  EXPECT_EQ(ParquetRowCount(TempPath("missing")).status().code(), StatusCode::kNotFound);
  const std::string p = TempPath("bad");
  auto write = [&](std::string_view bytes) { std::ofstream(p, std::ios::binary) << bytes; };
  using namespace std::string_view_literals;
  write("PAR1 this is not a parquet file");
  auto r = ParquetRowCount(p);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("not a Parquet file"), std::string::npos);
  write("PAR1xxxxxxxxxxxx\x10\0\0\0PARE"sv);
  r = ParquetRowCount(p);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("encrypted"), std::string::npos);
  write("PAR1xx\xff\xff\0\0PAR1"sv);
  r = ParquetRowCount(p);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("length"), std::string::npos);
  std::filesystem::remove(p);
}

TEST(ParquetFooter, FilesWrittenByPyarrow) {
  const char* py = std::getenv("PETAL_PYTHON");
  const std::string python = py && *py ? py : "python3";
  if (std::system((python + " -c 'import pyarrow' 2>/dev/null").c_str()) != 0) {
    GTEST_SKIP() << python << " has no pyarrow";
  }
  const std::string dir = TempPath("files");
  std::filesystem::create_directories(dir);
  // Row counts around the group size, nested and dictionary columns, key-value metadata, and
  // an empty file; pyarrow's own count goes to <file>.n.
  const std::string script =
      "import sys, pyarrow as pa, pyarrow.parquet as pq\n"
      "d = sys.argv[1]\n"
      "for i, n in enumerate([0, 1, 999, 70001]):\n"
      "    t = pa.table({'id': [str(k) for k in range(n)], 'x': list(range(n)),\n"
      "                  'v': [[k, k + 1] for k in range(n)],\n"
      "                  's': [{'a': k, 'b': 'q' * (k % 5)} for k in range(n)],\n"
      "                  'm': pa.array([[('k', k)] for k in range(n)], pa.map_(pa.string(), "
      "pa.int64())),\n"
      "                  'c': pa.array(['u', 'w'] * (n // 2) + ['u'] * (n % "
      "2)).dictionary_encode()},\n"
      "                 metadata={'petal': 'x' * 300})\n"
      "    p = f'{d}/f{i}.parquet'\n"
      "    pq.write_table(t, p, row_group_size=4096, compression='zstd' if i % 2 else 'none')\n"
      "    open(p + '.n', 'w').write(str(pq.ParquetFile(p).metadata.num_rows))\n";
  const std::string sp = dir + "/make.py";
  std::ofstream(sp) << script;
  ASSERT_EQ(std::system((python + " " + sp + " " + dir).c_str()), 0);
  for (int i = 0; i < 4; ++i) {
    const std::string p = dir + "/f" + std::to_string(i) + ".parquet";
    int64_t want = -1;
    std::ifstream(p + ".n") >> want;
    auto n = ParquetRowCount(p);
    ASSERT_TRUE(n.ok()) << n.status().message();
    EXPECT_EQ(*n, want) << p;
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace petal::bulk
