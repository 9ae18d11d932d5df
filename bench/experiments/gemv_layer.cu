// gemv_layer.cu: cudaep's own GEMV kernels (ep/kernels/cuda/gemv.cu, included as is) over a
// decode layer's four projections of the 1B Llama (hidden 2048, MLP 8192, 8 key/value heads of
// 64), launched as gemv.go plans them (gemvGeometry) and replayed from one CUDA graph, as a
// decode step runs them. Every launch reads its own copy of the weights (copies round-robin over
// 3 GiB), so nothing comes from L2.
//
// gemv_stream.cu's plain GEMV (no split-K reduction, no prologue) streamed the same layer in
// 35.5 us from a graph (0.71 of 4.8 TB/s); CUPTI inside the decode step measured cudaep's four
// launches at about 46 us a layer. Which part costs the difference: the split-K reduction by
// the last block of each tile, or the prologues (the RMS normalizations before q+k+v and
// gate+up, the gated SiLU before down)?
//
//   nvcc -O3 -arch=sm_90 -o gemv_layer gemv_layer.cu && ./gemv_layer
//
// -DGEMV_CU='"file"' -I ep/kernels/cuda compiles it against another version of gemv.cu.
#ifndef GEMV_CU
#define GEMV_CU "../../ep/kernels/cuda/gemv.cu"
#endif
#include GEMV_CU

#include "experiment.cuh"

int main() {
	int sms = 0;
	CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
	const u64 pool = 3ull << 30;
	char* big;
	CHECK(cudaMalloc(&big, pool));
	CHECK(cudaMemset(big, 0x3c, pool));
	bf16_t *a, *a2, *gamma, *y, *hsum;
	CHECK(cudaMalloc(&a, 8192 * 2));
	CHECK(cudaMalloc(&a2, 8192 * 2));
	CHECK(cudaMalloc(&gamma, 8192 * 2));
	CHECK(cudaMalloc(&hsum, 8192 * 2));
	CHECK(cudaMalloc(&y, 4 * 8192 * 2));
	CHECK(cudaMemset(a, 0x3c, 8192 * 2));
	CHECK(cudaMemset(a2, 0x3c, 8192 * 2));
	CHECK(cudaMemset(gamma, 0x3c, 8192 * 2));
	const GemvScratch scratch;
	cudaStream_t st;
	CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));

	// launch is gemv.go's launch of p, with p's prologue when pro, else the plain kernel.
	auto launch = [&](const Proj& p, const char* w, bool pro) {
		CHECK(launch_gemv(st, sms, scratch, p, pro ? p.mode : GEMV_PLAIN, w, y, GemvRow{a, a2, gamma, hsum}));
	};
	printf("# gemv_layer on %d SMs: cudaep's GEMV kernels from one CUDA graph, us (median of 7 replays), share of 4.8 TB/s\n", sms);
	printf("# each projection alone, every launch another copy of its weights\n");
	for (const Proj& p : llama_layer) {
		const u64 copies = pool / p.bytes();
		printf("%-18s %6.1f MB:", p.name, p.bytes() / 1e6);
		for (int pro = 0; pro < (p.mode == GEMV_PLAIN ? 1 : 2); ++pro) {
			const float t = median_us(st, copies, true, [&] {
				for (u64 c = 0; c < copies; ++c) launch(p, big + c * p.bytes(), pro);
			});
			printf("   %s %6.2f us %.3f", pro ? "prologue" : "plain", t, p.bytes() / (t * 1e-6) / 4.8e12);
		}
		printf("\n");
	}
	u64 layer_bytes = 0;
	for (const Proj& p : llama_layer) layer_bytes += p.bytes();
	const u64 layers = pool / layer_bytes;
	printf("# the layer's four launches in order, %llu layers round-robin\n", layers);
	for (int pro = 0; pro < 2; ++pro) {
		const float t = median_us(st, layers, true, [&] {
			char* at = big;
			for (u64 l = 0; l < layers; ++l) {
				for (const Proj& p : llama_layer) {
					launch(p, at, pro);
					at += p.bytes();
				}
			}
		});
		printf("%-34s %6.2f us a layer, %.3f of 4.8 TB/s\n", pro ? "with the decode step's prologues" : "plain kernels (no prologue)", t,
			layer_bytes / (t * 1e-6) / 4.8e12);
	}
	return 0;
}
