"""Every ImageType of the wire contract, in every pixels_as_float / compress combination, through a real
AirSim client (issue 29), run against a server.

    python image_types.py MODULE PORT      (MODULE: airsim or cosysairsim)

Prints one JSON line per result the test checks, then {"step": "done"}.
"""

import sys

from client_script import error_of, say

module, port = sys.argv[1], int(sys.argv[2])
airsim = __import__(module)

client = airsim.VehicleClient(port=port)
client.confirmConnection()
combinations = [(as_float, compress) for as_float in (False, True) for compress in (False, True)]
requests = [airsim.ImageRequest("0", image_type, as_float, compress)
            for image_type in range(12) for as_float, compress in combinations]
for request, response in zip(requests, client.simGetImages(requests)):
    say("image", type=request.image_type, asked=[request.pixels_as_float, request.compress],
        answered=[response.image_type, bool(response.pixels_as_float), bool(response.compress)],
        size=[response.width, response.height], message=response.message,
        uint8=bytes(response.image_data_uint8).hex(), floats=list(response.image_data_float))
say("single", normals_png=client.simGetImage("0", airsim.ImageType.SurfaceNormals).hex(),
    lighting_error=error_of(lambda: client.simGetImage("0", 10)), alive=client.ping())
say("done")
