// The restricted unpickler (model/torch_pickle.h) and the PyTorch file reader
// (model/torch_archive.h): every pickle protocol, the global allow-list, bounds on malformed
// input, and the file shapes torch.save / torch.jit.save write.
#include "model/checkpoint.h"
#include "model/torch_archive.h"
#include "model/torch_pickle.h"
#include "support/support.h"

#include <corridorkey/check.h>

#include <c10/core/CPUAllocator.h>
#include <caffe2/serialize/inline_container.h>
#include <catch2/catch.hpp>
#include <torch/serialize.h>

#include <cstring>
#include <fstream>
#include <random>
#include <sstream>

using namespace corridorkey::model;
using Catch::Matchers::Contains;
using corridorkey::ModelError;
namespace pk = corridorkey::model::pickle;
namespace fs = std::filesystem;

namespace {

std::string unhex(const std::string& h) {
  std::string out;
  for (size_t i = 0; i + 1 < h.size(); i += 2)
    out += static_cast<char>(std::stoi(h.substr(i, 2), nullptr, 16));
  return out;
}

/// Storages for hand-written pickles: zeroed bytes, at most 1 MiB.
pk::UnpickleOptions options(bool torchscript = false) {
  pk::UnpickleOptions o;
  o.what = "test.pkl";
  o.torchscript = torchscript;
  o.load_storage = [](const std::string& key, c10::ScalarType, uint64_t nbytes) {
    CK_CHECK(nbytes <= (1u << 20), ModelError, "test.pkl: storage '", key, "' too large");
    c10::Storage st(c10::Storage::use_byte_size_t(), nbytes, c10::GetDefaultCPUAllocator(), false);
    if (nbytes) std::memset(st.mutable_data(), 0, nbytes);
    return st;
  };
  return o;
}

pk::Pickle unpickle(const std::string& bytes, bool torchscript = false) {
  return pk::unpickle(bytes.data(), bytes.size(), options(torchscript));
}

/// The same Python object pickled with protocols 0..5 (pickle.dumps in the project venv):
///   L = [7]
///   {"ints": [0, 1, -1, 255, 256, 65535, 65536, -2**31, 2**31, 2**63-1, -2**63],
///    "big": 2**70, "floats": [0.5, -1e300], "none": None, "bools": (True, False),
///    "str": "gr\u00fcn \u03c8 \\ \n", "bytes": b"\x00\xff", "ba": bytearray(b"ab"),
///    "set": {3}, "fs": frozenset({4}), "tuples": ((), (1,), (1, 2), (1, 2, 3), (1, 2, 3, 4)),
///    "nested": {"k": [[]]}, "shared": [L, L]}
const char* const kProtocolPickles[] = {
    // protocol 0
    "286470300a56696e74730a70310a286c70320a49300a6149310a61492d310a61493235350a61493235360a6149363535"
    "33350a614936353533360a61492d323134373438333634380a614c323134373438333634384c0a614c39323233333732"
    "3033363835343737353830374c0a614c2d393232333337323033363835343737353830384c0a6173566269670a70330a"
    "4c313138303539313632303731373431313330333432344c0a7356666c6f6174730a70340a286c70350a46302e350a61"
    "462d31652b3330300a6173566e6f6e650a70360a4e7356626f6f6c730a70370a284930310a4930300a7470380a735673"
    "74720a70390a566772fc6e205c7530336338205c7530303563205c75303030610a7031300a735662797465730a703131"
    "0a635f636f646563730a656e636f64650a7031320a28565c7530303030ff0a7031330a566c6174696e310a7031340a74"
    "7031350a527031360a735662610a7031370a635f5f6275696c74696e5f5f0a6279746561727261790a7031380a286731"
    "320a285661620a7031390a6731340a747032300a527032310a747032320a527032330a73567365740a7032340a635f5f"
    "6275696c74696e5f5f0a7365740a7032350a28286c7032360a49330a61747032370a527032380a735666730a7032390a"
    "635f5f6275696c74696e5f5f0a66726f7a656e7365740a7033300a28286c7033310a49340a61747033320a527033330a"
    "73567475706c65730a7033340a2828742849310a747033350a2849310a49320a747033360a2849310a49320a49330a74"
    "7033370a2849310a49320a49330a49340a747033380a747033390a73566e65737465640a7034300a28647034310a566b"
    "0a7034320a286c7034330a286c7034340a617373567368617265640a7034350a286c7034360a286c7034370a49370a61"
    "616734370a61732e",
    // protocol 1
    "7d7100285804000000696e747371015d7102284b004b014affffffff4bff4d00014dffff4a000001004a000000804c32"
    "3134373438333634384c0a4c393232333337323033363835343737353830374c0a4c2d39323233333732303336383534"
    "3737353830384c0a65580300000062696771034c313138303539313632303731373431313330333432344c0a58060000"
    "00666c6f61747371045d710528473fe000000000000047fe37e43c8800759c6558040000006e6f6e6571064e58050000"
    "00626f6f6c737107284930310a4930300a74710858030000007374727109580c0000006772c3bc6e20cf88205c200a71"
    "0a58050000006279746573710b635f636f646563730a656e636f64650a710c28580300000000c3bf710d58060000006c"
    "6174696e31710e74710f527110580200000062617111635f5f6275696c74696e5f5f0a6279746561727261790a711228"
    "680c28580200000061627113680e74711452711574711652711758030000007365747118635f5f6275696c74696e5f5f"
    "0a7365740a7119285d711a4b036174711b52711c58020000006673711d635f5f6275696c74696e5f5f0a66726f7a656e"
    "7365740a711e285d711f4b046174712052712158060000007475706c657371222829284b01747123284b014b02747124"
    "284b014b024b03747125284b014b024b034b0474712674712758060000006e657374656471287d712958010000006b71"
    "2a5d712b5d712c61735806000000736861726564712d5d712e285d712f4b0761682f65752e",
    // protocol 2
    "80027d7100285804000000696e747371015d7102284b004b014affffffff4bff4d00014dffff4a000001004a00000080"
    "8a0500000080008a08ffffffffffffff7f8a08000000000000008065580300000062696771038a090000000000000000"
    "405806000000666c6f61747371045d710528473fe000000000000047fe37e43c8800759c6558040000006e6f6e657106"
    "4e5805000000626f6f6c737107888986710858030000007374727109580c0000006772c3bc6e20cf88205c200a710a58"
    "050000006279746573710b635f636f646563730a656e636f64650a710c580300000000c3bf710d58060000006c617469"
    "6e31710e86710f527110580200000062617111635f5f6275696c74696e5f5f0a6279746561727261790a7112680c5802"
    "00000061627113680e86711452711585711652711758030000007365747118635f5f6275696c74696e5f5f0a7365740a"
    "71195d711a4b036185711b52711c58020000006673711d635f5f6275696c74696e5f5f0a66726f7a656e7365740a711e"
    "5d711f4b046185712052712158060000007475706c6573712228294b018571234b014b028671244b014b024b03877125"
    "284b014b024b034b0474712674712758060000006e657374656471287d712958010000006b712a5d712b5d712c617358"
    "06000000736861726564712d5d712e285d712f4b0761682f65752e",
    // protocol 3
    "80037d7100285804000000696e747371015d7102284b004b014affffffff4bff4d00014dffff4a000001004a00000080"
    "8a0500000080008a08ffffffffffffff7f8a08000000000000008065580300000062696771038a090000000000000000"
    "405806000000666c6f61747371045d710528473fe000000000000047fe37e43c8800759c6558040000006e6f6e657106"
    "4e5805000000626f6f6c737107888986710858030000007374727109580c0000006772c3bc6e20cf88205c200a710a58"
    "050000006279746573710b430200ff710c58020000006261710d636275696c74696e730a6279746561727261790a710e"
    "43026162710f85711052711158030000007365747112636275696c74696e730a7365740a71135d71144b036185711552"
    "7116580200000066737117636275696c74696e730a66726f7a656e7365740a71185d71194b046185711a52711b580600"
    "00007475706c6573711c28294b0185711d4b014b0286711e4b014b024b0387711f284b014b024b034b04747120747121"
    "58060000006e657374656471227d712358010000006b71245d71255d71266173580600000073686172656471275d7128"
    "285d71294b0761682965752e",
    // protocol 4
    "8004953c010000000000007d94288c04696e7473945d94284b004b014affffffff4bff4d00014dffff4a000001004a00"
    "0000808a0500000080008a08ffffffffffffff7f8a080000000000000080658c03626967948a09000000000000000040"
    "8c06666c6f617473945d9428473fe000000000000047fe37e43c8800759c658c046e6f6e65944e8c05626f6f6c739488"
    "8986948c03737472948c0c6772c3bc6e20cf88205c200a948c05627974657394430200ff948c026261948c086275696c"
    "74696e73948c096279746561727261799493944302616294859452948c03736574948f94284b03908c02667394284b04"
    "91948c067475706c65739428294b0185944b014b0286944b014b024b038794284b014b024b034b04749474948c066e65"
    "73746564947d948c016b945d945d9461738c06736861726564945d94285d944b0761682565752e",
    // protocol 5
    "80059526010000000000007d94288c04696e7473945d94284b004b014affffffff4bff4d00014dffff4a000001004a00"
    "0000808a0500000080008a08ffffffffffffff7f8a080000000000000080658c03626967948a09000000000000000040"
    "8c06666c6f617473945d9428473fe000000000000047fe37e43c8800759c658c046e6f6e65944e8c05626f6f6c739488"
    "8986948c03737472948c0c6772c3bc6e20cf88205c200a948c05627974657394430200ff948c02626194960200000000"
    "0000006162948c03736574948f94284b03908c02667394284b0491948c067475706c65739428294b0185944b014b0286"
    "944b014b024b038794284b014b024b034b04749474948c066e6573746564947d948c016b945d945d9461738c06736861"
    "726564945d94285d944b0761682065752e",};

/// The argument tuple of torch._utils._rebuild_tensor_v2 over a fresh storage, written with
/// protocol 0 opcodes: (storage, offset, size, stride, requires_grad, hooks).
std::string tensor_args(const std::string& storage_type, int64_t storage_numel, int64_t offset,
                        const std::vector<int64_t>& size, const std::vector<int64_t>& stride) {
  std::ostringstream p;
  p << "((Vstorage\nctorch\n" << storage_type << "\nV0\nVcpu\nI" << storage_numel << "\ntQ";
  p << "I" << offset << "\n(";
  for (auto s : size) p << "I" << s << "\n";
  p << "t(";
  for (auto s : stride) p << "I" << s << "\n";
  p << "tI00\nccollections\nOrderedDict\n)Rt";
  return p.str();
}

std::string tensor_pickle(const std::string& storage_type, int64_t storage_numel, int64_t offset,
                          const std::vector<int64_t>& size, const std::vector<int64_t>& stride) {
  return "ctorch._utils\n_rebuild_tensor_v2\n" +
         tensor_args(storage_type, storage_numel, offset, size, stride) + "R.";
}

/// Every outcome of unpickling hostile bytes is a value or a ModelError.
void must_not_crash(const std::string& bytes, bool torchscript = false) {
  try {
    (void)unpickle(bytes, torchscript);
  } catch (const ModelError& e) {
    REQUIRE(std::string(e.what()).rfind("test.pkl: ", 0) == 0);
  } catch (const std::exception& e) {
    FAIL("not a ModelError: " << e.what());
  }
}

void write_bytes(const fs::path& p, const std::string& bytes) {
  std::ofstream f(p, std::ios::binary);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

/// Copies a zip archive record by record, letting `edit` change or drop records.
void rewrite_zip(const std::string& src, const std::string& dst,
                 const std::function<void(const std::string&, std::string&, bool&)>& edit) {
  caffe2::serialize::PyTorchStreamReader r(src);
  caffe2::serialize::PyTorchStreamWriter w(dst);
  for (const auto& name : r.getAllRecords()) {
    if (name == "version" || name.rfind(".data/", 0) == 0) continue;  // the writer adds these
    auto [ptr, n] = r.getRecord(name);
    std::string data(static_cast<const char*>(ptr.get()), n);
    bool keep = true;
    edit(name, data, keep);
    if (keep) w.writeRecord(name, data.data(), data.size());
  }
  w.writeEndOfFile();
}

std::string marker_for(const std::string& fixture) { return fixture + ".marker"; }

}  // namespace

TEST_CASE("unpickler: protocols 0-5 build the same inert values", "[unit]") {
  for (int proto = 0; proto < 6; ++proto) {
    INFO("protocol " << proto);
    const auto p = unpickle(unhex(kProtocolPickles[proto]));
    const auto& r = p.root();
    REQUIRE(r.kind == pk::Kind::Dict);
    CHECK(r.entries.size() == 13);

    const auto* ints = r.get("ints");
    REQUIRE(ints);
    REQUIRE(ints->kind == pk::Kind::List);
    const std::vector<int64_t> want{0, 1, -1, 255, 256, 65535, 65536, INT32_MIN,
                                    int64_t{1} << 31, INT64_MAX, INT64_MIN};
    REQUIRE(ints->items.size() == want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      INFO("ints[" << i << "]");
      REQUIRE(ints->items[i]->kind == pk::Kind::Int);
      CHECK(ints->items[i]->i == want[i]);
    }
    CHECK(r.get("big")->kind == pk::Kind::BigInt);  // 2**70 is kept inert, not truncated
    const auto* fl = r.get("floats");
    REQUIRE(fl->items.size() == 2);
    CHECK(fl->items[0]->f == 0.5);
    CHECK(fl->items[1]->f == -1e300);
    CHECK(r.get("none")->kind == pk::Kind::None);
    const auto* bools = r.get("bools");
    REQUIRE(bools->kind == pk::Kind::Tuple);
    REQUIRE(bools->items.size() == 2);
    CHECK((bools->items[0]->kind == pk::Kind::Bool && bools->items[0]->b));
    CHECK((bools->items[1]->kind == pk::Kind::Bool && !bools->items[1]->b));
    CHECK(r.get("str")->s == "gr\xc3\xbcn \xcf\x88 \\ \n");  // UTF-8
    CHECK(r.get("bytes")->kind == pk::Kind::Bytes);
    CHECK(r.get("bytes")->s == std::string("\x00\xff", 2));
    CHECK(r.get("ba")->kind == pk::Kind::Bytes);
    CHECK(r.get("ba")->s == "ab");
    REQUIRE(r.get("set")->kind == pk::Kind::Set);
    CHECK(r.get("set")->items.at(0)->i == 3);
    REQUIRE(r.get("fs")->kind == pk::Kind::Set);
    CHECK(r.get("fs")->items.at(0)->i == 4);
    const auto* tuples = r.get("tuples");
    REQUIRE(tuples->items.size() == 5);
    for (size_t n = 0; n < 5; ++n) {
      REQUIRE(tuples->items[n]->kind == pk::Kind::Tuple);
      REQUIRE(tuples->items[n]->items.size() == n);
      for (size_t k = 0; k < n; ++k) CHECK(tuples->items[n]->items[k]->i == static_cast<int64_t>(k + 1));
    }
    const auto* nested = r.get("nested")->get("k");
    REQUIRE(nested);
    REQUIRE(nested->items.size() == 1);
    CHECK(nested->items[0]->kind == pk::Kind::List);
    const auto* shared = r.get("shared");
    REQUIRE(shared->items.size() == 2);
    CHECK(shared->items[0] == shared->items[1]);  // one list, referenced twice (memo)
    CHECK(shared->items[0]->items.at(0)->i == 7);
  }
}

TEST_CASE("unpickler: tensors are views of one storage, bounds checked", "[unit]") {
  SECTION("a 2x3 view at an offset, transposed strides") {
    const auto p = unpickle(tensor_pickle("FloatStorage", 10, 2, {2, 3}, {1, 2}));
    REQUIRE(p.root().kind == pk::Kind::Tensor);
    const auto& t = p.root().tensor;
    CHECK(t.sizes() == torch::IntArrayRef{2, 3});
    CHECK(t.strides() == torch::IntArrayRef{1, 2});
    CHECK(t.storage_offset() == 2);
    CHECK(t.dtype() == torch::kFloat);
    CHECK(t.storage().nbytes() == 40);
  }
  SECTION("every legacy storage class maps to its dtype") {
    const std::vector<std::pair<std::string, torch::Dtype>> types{
        {"HalfStorage", torch::kHalf}, {"BFloat16Storage", torch::kBFloat16},
        {"DoubleStorage", torch::kDouble}, {"LongStorage", torch::kLong},
        {"IntStorage", torch::kInt}, {"ShortStorage", torch::kShort},
        {"CharStorage", torch::kChar}, {"ByteStorage", torch::kByte},
        {"BoolStorage", torch::kBool}, {"ComplexFloatStorage", torch::kComplexFloat}};
    for (const auto& [name, dtype] : types) {
      INFO(name);
      CHECK(unpickle(tensor_pickle(name, 4, 0, {4}, {1})).root().tensor.dtype() == dtype);
    }
  }
  SECTION("out of bounds, negative, overflowing and over-expanded tensors are refused") {
    const std::vector<std::tuple<std::vector<int64_t>, std::vector<int64_t>, int64_t, std::string>> bad{
        {{4, 3}, {3, 1}, 0, "reaches element 11 of a storage holding 6"},
        {{2, 3}, {3, 1}, 1, "reaches element"},
        {{2}, {-1}, 0, "negative or overflowing"},
        {{-2}, {1}, 0, "negative or overflowing"},
        {{2}, {1}, -1, "negative or overflowing"},
        {{int64_t{1} << 40, int64_t{1} << 40}, {0, 0}, 0, "negative or overflowing"},
        {{int64_t{1} << 30}, {0}, 0, "expands a storage of 6"},
        {{2, 3}, {3}, 0, "different lengths"}};
    for (const auto& [size, stride, offset, msg] : bad) {
      const auto bytes = tensor_pickle("FloatStorage", 6, offset, size, stride);
      CHECK_THROWS_AS(unpickle(bytes), ModelError);
      CHECK_THROWS_WITH(unpickle(bytes), Contains("test.pkl") && Contains(msg));
    }
    // A stride-0 view within the expansion bound is what torch.save writes for expand().
    CHECK(unpickle(tensor_pickle("FloatStorage", 1, 0, {1000}, {0})).root().tensor.numel() == 1000);
  }
  SECTION("Parameter and tensor-subclass wrappers give the tensor itself") {
    const auto args = tensor_args("FloatStorage", 4, 0, {4}, {1});
    const std::string v2 = "ctorch._utils\n_rebuild_tensor_v2\n" + args + "R";
    const std::string hooks = "ccollections\nOrderedDict\n)R";
    for (const auto& bytes : std::vector<std::string>{
             "ctorch._utils\n_rebuild_parameter\n(" + v2 + "I01\n" + hooks + "tR.",
             "ctorch._utils\n_rebuild_parameter_with_state\n(" + v2 + "I01\n" + hooks + "}tR.",
             "ctorch.nn.parameter\nParameter\n(" + v2 + "tR.",
             "ctorch._tensor\n_rebuild_from_type_v2\n(ctorch._utils\n_rebuild_tensor_v2\n"
             "ctorch.nn.parameter\nParameter\n" + args + "}tR.",
             // pre-1.0 files: _rebuild_tensor(storage, offset, size, stride)
             "ctorch._utils\n_rebuild_tensor\n((Vstorage\nctorch\nFloatStorage\nV0\nVcpu\nI4\ntQ"
             "I0\n(I4\nt(I1\nttR."}) {
      INFO(bytes);
      const auto p = unpickle(bytes);
      REQUIRE(p.root().kind == pk::Kind::Tensor);
      CHECK(p.root().tensor.sizes() == torch::IntArrayRef{4});
    }
    CHECK_THROWS_WITH(unpickle("ctorch._tensor\n_rebuild_from_type_v2\n(ctorch._utils\n"
                               "_rebuild_tensor_v2\nccollections\nOrderedDict\n" + args + "}tR."),
                      Contains("only Tensor and Parameter"));
    // _rebuild_tensor_v3: an untyped (byte) storage read as the dtype it names.
    const auto v3 = unpickle(
        "ctorch._utils\n_rebuild_tensor_v3\n((Vstorage\nctorch.storage\nUntypedStorage\nV0\nVcpu\n"
        "I12\ntQI1\n(I5\nt(I1\ntI00\nccollections\nOrderedDict\n)Rctorch\nuint16\ntR.");
    CHECK(v3.root().tensor.dtype() == torch::kUInt16);
    CHECK(v3.root().tensor.numel() == 5);
    CHECK_THROWS_WITH(
        unpickle("ctorch._utils\n_rebuild_tensor_v3\n((Vstorage\nctorch.storage\nUntypedStorage\n"
                 "V0\nVcpu\nI12\ntQI1\n(I6\nt(I1\ntI00\nccollections\nOrderedDict\n)Rctorch\n"
                 "uint16\ntR."),
        Contains("reaches element 6 of a storage holding 6"));
  }
  SECTION("storage persistent ids are validated") {
    CHECK_THROWS_WITH(unpickle("(Vstorage\nctorch\nFloatStorage\nV0\nVcpu\nI-1\ntQ."),
                      Contains("bad size"));
    CHECK_THROWS_WITH(unpickle("(Vstorage\nccollections\nOrderedDict\nV0\nVcpu\nI1\ntQ."),
                      Contains("without a storage type"));
    CHECK_THROWS_WITH(unpickle("(Vmodule\nNtQ."), Contains("only storages"));
    CHECK_THROWS_WITH(unpickle("K\x01Q."), Contains("persistent id"));
  }
}

TEST_CASE("unpickler: globals outside the allow-list are refused before anything runs", "[unit]") {
  const std::vector<std::pair<std::string, std::string>> hostile{
      {"cposix\nsystem\n(Vtouch /tmp/ck_never\ntR.", "'posix.system'"},
      {"cos\nsystem\n(Vtouch /tmp/ck_never\ntR.", "'os.system'"},
      {"\x80\x04\x8c\x08" "builtins\x8c\x04" "eval\x93\x8c\x01" "1\x85R.", "'builtins.eval'"},
      {"(isubprocess\nPopen\n(Vls\nl.", "'subprocess.Popen'"},
      {"(cbuiltins\nexec\nVpass\no.", "'builtins.exec'"},
      {"ctorch._utils\n_rebuild_qtensor\n.", "'torch._utils._rebuild_qtensor'"},
      {"ctorch.jit._pickle\nbuild_tensor_from_id\n.", "'torch.jit._pickle.build_tensor_from_id'"},
      {"ctorch\nload\n.", "'torch.load'"},
      {"c__torch__\nM\n)\x81.", "TorchScript classes are only read from TorchScript archives"}};
  for (const auto& [bytes, name] : hostile) {
    INFO(name);
    CHECK_THROWS_AS(unpickle(bytes), ModelError);
    CHECK_THROWS_WITH(unpickle(bytes), Contains("test.pkl") && Contains("refusing global") &&
                                           Contains(name));
  }
  // The refusal happens at the GLOBAL opcode: nothing after it is even read.
  CHECK_THROWS_WITH(unpickle("cposix\nsystem\n\xff\xff"), Contains("pickle offset 0"));
  CHECK_FALSE(fs::exists("/tmp/ck_never"));
}

TEST_CASE("unpickler: TorchScript objects are inert: NEWOBJ and BUILD keep the state", "[unit]") {
  const auto p = unpickle("c__torch__.m\nM\n)\x81}(Vtraining\nI01\nVn\nI3\nub.", true);
  const auto& m = p.root();
  REQUIRE(m.kind == pk::Kind::Object);
  CHECK(m.s == "__torch__.m.M");
  REQUIRE(m.state);
  CHECK(m.state->get("n")->i == 3);
  // A state that is not a dict (a custom __getstate__) is kept as data too.
  const auto q = unpickle("c__torch__\nArmed\n)\x81(Vpath\nI01\ntb.", true);
  CHECK(q.root().state->kind == pk::Kind::Tuple);
  // Classes are never called.
  CHECK_THROWS_WITH(unpickle("c__torch__\nM\n)R.", true), Contains("cannot be called"));
  // torch.jit._pickle helpers only rebuild lists / pass values through.
  const auto l = unpickle("ctorch.jit._pickle\nbuild_intlist\n((I1\nI2\nltR.", true);
  CHECK(l.root().kind == pk::Kind::List);
  CHECK(l.root().items.size() == 2);
}

TEST_CASE("unpickler: malformed input is a ModelError naming the file, never a crash", "[unit]") {
  const std::vector<std::pair<std::string, std::string>> bad{
      {"", "truncated"},
      {"\x80\x02", "truncated"},
      {std::string("X\xff\xff\xff\xff", 5), "needs 4294967295 bytes"},
      {std::string("\x8d\xff\xff\xff\xff\xff\xff\xff\x7f", 9), "truncated"},
      {std::string("\x8b\xff\xff\xff\x7f", 5), "truncated"},
      {std::string("\x8b\xff\xff\xff\xff", 5), "negative LONG4"},
      {"h\x05.", "memo entry 5 not set"},
      {"R.", "stack underflow"},
      {"K\x01K\x02" "a.", "APPEND to a int"},
      {"\xff", "unknown pickle opcode 0xff"},
      {"\x80\x06.", "newer than 5"},
      {"\x82\x01.", "extension registry"},
      {"\x97.", "out-of-band"},
      {"t.", "no MARK"},
      {"}(K\x01u.", "odd number"},
      {"K\x01K\x02.", "left on the stack"},
      {"NN\x81.", "NEWOBJ arguments must be a tuple"},
      {"N)b.", "BUILD on a None"},
      {"I12x\n.", "bad integer"},
      {"Fnan!\n.", "malformed FLOAT"},
      {"S'unterminated\n.", "not quoted"},
      {"c_codecs\nencode\n(Vx\nVutf8\ntR.", "encoding 'utf8'"}};
  for (const auto& [bytes, msg] : bad) {
    INFO(msg);
    CHECK_THROWS_AS(unpickle(bytes), ModelError);
    CHECK_THROWS_WITH(unpickle(bytes), Contains("test.pkl: ") && Contains(msg));
  }
  SECTION("deep nesting and cycles cost no recursion") {
    const int n = 100000;
    const std::string nested = std::string(n, ']') + std::string(n - 1, 'a') + ".";
    CHECK(unpickle(nested).root().kind == pk::Kind::List);
    const auto cyc = unpickle(std::string("]q\x00h\x00" "a.", 7));  // l = []; l.append(l)
    CHECK(cyc.root().items.at(0) == &cyc.root());
  }
  SECTION("random mutations and truncations of real pickles") {
    std::vector<std::string> seeds{unhex(kProtocolPickles[2]), unhex(kProtocolPickles[5]),
                                   unhex(kProtocolPickles[0]),
                                   tensor_pickle("FloatStorage", 6, 1, {2, 2}, {2, 1})};
    // torch's own C++ pickler output (what torch::pickle_save writes into data.pkl).
    c10::Dict<std::string, torch::Tensor> d;
    d.insert("a", torch::arange(6).reshape({2, 3}));
    d.insert("b", torch::ones({2}, torch::kHalf));
    const auto zip = torch::pickle_save(c10::IValue(d));
    std::istringstream is(std::string(zip.begin(), zip.end()));
    caffe2::serialize::PyTorchStreamReader reader(&is);
    auto [ptr, n] = reader.getRecord("data.pkl");
    seeds.emplace_back(static_cast<const char*>(ptr.get()), n);
    CHECK(unpickle(seeds.back()).root().get("a")->tensor.sizes() == torch::IntArrayRef{2, 3});

    std::mt19937 rng(1234);
    for (const auto& s : seeds) {
      for (size_t cut = 0; cut < s.size(); ++cut) must_not_crash(s.substr(0, cut));
      for (int iter = 0; iter < 1500; ++iter) {
        std::string m = s;
        const int flips = 1 + static_cast<int>(rng() % 4);
        for (int f = 0; f < flips; ++f) m[rng() % m.size()] = static_cast<char>(rng() & 0xFF);
        must_not_crash(m);
        must_not_crash(m, /*torchscript=*/true);
      }
    }
  }
}

TEST_CASE("every dtype, views sharing a storage, tied entries, zip / p5 / legacy", "[model]") {
  const auto base = torch::arange(24, torch::kDouble).reshape({4, 6});
  for (const char* file : {"dtypes.pth", "dtypes_p5.pth", "dtypes_legacy.pth"}) {
    INFO(file);
    const auto entries = load_tensor_dict(ck_test::fixture(file));
    std::map<std::string, torch::Tensor> d(entries.begin(), entries.end());
    const bool legacy = std::string(file).find("legacy") != std::string::npos;
    std::vector<std::pair<std::string, torch::Dtype>> dtypes{
        {"float32", torch::kFloat}, {"float16", torch::kHalf}, {"bfloat16", torch::kBFloat16},
        {"float64", torch::kDouble}, {"int8", torch::kChar}, {"uint8", torch::kByte},
        {"int16", torch::kShort}, {"int32", torch::kInt}, {"int64", torch::kLong},
        {"bool", torch::kBool}, {"complex64", torch::kComplexFloat},
        {"complex128", torch::kComplexDouble}};
    if (!legacy)
      for (auto x : {std::pair<std::string, torch::Dtype>{"uint16", torch::kUInt16},
                     {"uint32", torch::kUInt32}, {"uint64", torch::kUInt64},
                     {"float8_e4m3fn", torch::kFloat8_e4m3fn}})
        dtypes.push_back(x);
    for (const auto& [name, dtype] : dtypes) {
      INFO(name);
      REQUIRE(d.count(name));
      const auto& t = d[name];
      CHECK(t.dtype() == dtype);
      torch::Tensor want;
      if (dtype == torch::kBool) want = base.remainder(2).eq(1);
      else if (dtype == torch::kComplexFloat || dtype == torch::kComplexDouble)
        want = torch::complex(base, -base).to(dtype);
      else want = base.to(dtype);
      const auto as_double = [&](const torch::Tensor& x) {
        return x.is_complex() ? torch::view_as_real(x.contiguous()).to(torch::kDouble)
                              : x.to(torch::kDouble);
      };
      CHECK(torch::equal(as_double(t), as_double(want)));
      CHECK(torch::equal(as_double(d[name + "_t"]), as_double(want.t())));
      CHECK(torch::equal(as_double(d[name + "_slice"]), as_double(want.slice(0, 1, 3).slice(1, 2, 5))));
      // Views come back as views of the one storage, not copies.
      CHECK(d[name + "_t"].storage().is_alias_of(t.storage()));
      CHECK(d[name + "_slice"].storage().is_alias_of(t.storage()));
      CHECK_FALSE(d[name + "_t"].is_contiguous());
      CHECK(d[name + "_slice"].storage_offset() == 8);
    }
    CHECK(d["tied_a"].storage().is_alias_of(d["tied_b"].storage()));
    CHECK(torch::equal(d["tied_a"], torch::linspace(-1.0, 1.0, 5)));
    CHECK(torch::equal(d["tied_b"], d["tied_a"]));
    CHECK(torch::equal(d["param"], torch::full({2, 2}, 0.5)));
    CHECK(d["empty"].sizes() == torch::IntArrayRef{0, 5});
    CHECK(d["scalar"].dim() == 0);
    CHECK(d["scalar"].item<double>() == 3.5);
  }
}

TEST_CASE("a training checkpoint's other entries unpickle as inert values", "[model]") {
  for (const char* file : {"tiny128.pth", "tiny128_p4.pth", "tiny128_legacy.pth"}) {
    INFO(file);
    const auto ar = read_torch_archive(ck_test::fixture(file));
    const auto& root = ar.data.root();
    CHECK(ar.format == (std::string(file).find("legacy") != std::string::npos ? ArchiveFormat::Legacy
                                                                               : ArchiveFormat::Zip));
    REQUIRE(root.get("epoch"));
    CHECK(root.get("epoch")->i == 7);
    const auto* cfg = root.get("config");
    REQUIRE(cfg);
    CHECK(cfg->get("arch")->s == "tiny");
    CHECK(cfg->get("img_size")->i == 128);
    CHECK(cfg->get("betas")->items.at(1)->f == 0.999);
    const auto* shape = cfg->get("input_shape");  // torch.Size
    REQUIRE(shape->kind == pk::Kind::Tuple);
    CHECK(shape->items.at(3)->i == 128);
    CHECK(cfg->get("device")->s == "torch.device");
    CHECK(cfg->get("device")->state->s == "cpu");
    CHECK(cfg->get("dtype")->s == "torch.float32");
    CHECK(cfg->get("seed")->kind == pk::Kind::BigInt);
    CHECK(cfg->get("tag")->s == std::string("\x00\xffraw", 5));
    CHECK(cfg->get("note")->kind == pk::Kind::None);
    CHECK(cfg->get("name")->s == "gr\xc3\xbcn \xcf\x88");
    CHECK(cfg->get("flags")->items.size() == 2);
    // AdamW state: {param index: {"step", "exp_avg", "exp_avg_sq"}}.
    const auto* state = root.get("optimizer")->get("state");
    REQUIRE(state);
    REQUIRE_FALSE(state->entries.empty());
    const auto* first = state->entries.front().second;
    CHECK(first->get("exp_avg")->kind == pk::Kind::Tensor);
    CHECK(first->get("exp_avg_sq")->tensor.sizes() == first->get("exp_avg")->tensor.sizes());
  }
}

TEST_CASE("hostile torch.save files are refused naming the global; the payload never runs", "[model]") {
  for (const auto& [file, global] : {std::pair<std::string, std::string>{"evil_system.pth", "posix.system"},
                                     {"evil_eval.pth", "builtins.eval"}}) {
    INFO(file);
    const auto path = ck_test::fixture(file);
    const auto marker = marker_for(path);
    fs::remove(marker);
    CHECK_THROWS_AS(read_checkpoint(path), ModelError);
    CHECK_THROWS_WITH(read_checkpoint(path), Contains(path) && Contains("refusing global '" + global + "'"));
    CHECK_THROWS_AS(load_tensor_dict(path), ModelError);
    CHECK_FALSE(fs::exists(marker));
  }
}

TEST_CASE("a TorchScript archive is read as data: its __setstate__ never runs", "[model]") {
  // tests/make_fixtures.py proved that torch.jit.load of this archive writes the marker.
  const auto path = ck_test::fixture("tiny128_armed.ts");
  const auto marker = marker_for(path);
  fs::remove(marker);
  const auto ck = read_checkpoint(path);
  CHECK(ck.format == CheckpointFormat::TorchScript);
  CHECK(ck.config_from_file);
  auto armed = load_green_former(path);
  auto ref = load_green_former(ck_test::fixture("tiny128.ts"));
  auto got = armed->named_parameters(true);
  for (const auto& p : ref->named_parameters(true)) {
    INFO(p.key());
    REQUIRE(torch::equal(p.value(), got[p.key()]));
  }
  CHECK_FALSE(fs::exists(marker));
}

TEST_CASE("zip archive checks: byteorder, storage record sizes, truncation, corruption", "[model]") {
  const auto dir = ck_test::temp_dir("zipcheck");
  const auto src = ck_test::fixture("tiny128_top.pth");
  SECTION("big-endian archives are refused with a clear message") {
    const auto p = (dir / "bigendian.pth").string();
    rewrite_zip(src, p, [](const std::string& name, std::string& data, bool&) {
      if (name == "byteorder") data = "big";
    });
    CHECK_THROWS_AS(read_checkpoint(p), ModelError);
    CHECK_THROWS_WITH(read_checkpoint(p), Contains(p) && Contains("big-endian"));
  }
  SECTION("an archive without a byteorder record is little-endian (older torch)") {
    const auto p = (dir / "noorder.pth").string();
    rewrite_zip(src, p, [](const std::string& name, std::string&, bool& keep) {
      keep = name != "byteorder";
    });
    CHECK(read_checkpoint(p).tensors.size() == read_checkpoint(src).tensors.size());
  }
  SECTION("a storage record shorter than its tensors") {
    const auto p = (dir / "short.pth").string();
    rewrite_zip(src, p, [](const std::string& name, std::string& data, bool&) {
      if (name == "data/0") data.resize(data.size() / 2);
    });
    CHECK_THROWS_AS(read_checkpoint(p), ModelError);
    CHECK_THROWS_WITH(read_checkpoint(p), Contains(p) && Contains("data/0") && Contains("holds"));
  }
  SECTION("a missing storage record") {
    const auto p = (dir / "missing.pth").string();
    rewrite_zip(src, p, [](const std::string& name, std::string&, bool& keep) {
      keep = name != "data/3";
    });
    CHECK_THROWS_WITH(read_checkpoint(p), Contains("data/3") && Contains("missing"));
  }
  SECTION("a truncated legacy file") {
    const auto bytes = ck_test::read_file(ck_test::fixture("tiny128_legacy.pth"));
    for (double frac : {0.001, 0.01, 0.3, 0.9, 0.9999}) {
      INFO(frac);
      const auto p = (dir / "cut_legacy.pth").string();
      write_bytes(p, bytes.substr(0, static_cast<size_t>(bytes.size() * frac)));
      CHECK_THROWS_AS(read_checkpoint(p), ModelError);
      CHECK_THROWS_WITH(read_checkpoint(p), Contains(p) && Contains("truncated"));
    }
  }
  SECTION("random byte corruption of zip and legacy files") {
    std::mt19937 rng(99);
    for (const char* name : {"tiny128_top.pth", "tiny128_legacy.pth", "tiny128.ts"}) {
      const auto bytes = ck_test::read_file(ck_test::fixture(name));
      for (int iter = 0; iter < 40; ++iter) {
        std::string m = bytes;
        // Hit the pickle-bearing head as often as the tensor data.
        for (int f = 0; f < 3; ++f) {
          const size_t span = (rng() & 1) ? std::min<size_t>(m.size(), 4096) : m.size();
          m[rng() % span] = static_cast<char>(rng() & 0xFF);
        }
        const auto p = (dir / (std::string("fuzz_") + name)).string();
        write_bytes(p, m);
        try {
          (void)read_checkpoint(p);
        } catch (const corridorkey::Error&) {
        } catch (const std::exception& e) {
          FAIL(name << ": not a corridorkey::Error: " << e.what());
        }
      }
    }
  }
  fs::remove_all(dir);
}
